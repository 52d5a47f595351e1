# frozen_string_literal: true

module Chaos
  module AfterWork
    # Redis fails right after a block's work is done: stopped (SIGSTOP) or killed (kill -9, then
    # restarted from its AOF). Promise: the call returns normally (a job runner would otherwise run
    # the work again), and once Redis is back, what the block held goes away by itself (released in
    # the background or expired with its lease); a message is marked processed, not run again.
    class ReleaseCase
      FAULTS = %i[sigstop kill].freeze
      # After Redis is back: a lease, and a background release's retry pace, plus slack.
      EXPIRY = Settings::LEASE + 1.5

      def initialize(client, subject_class, fault, redis:)
        @subject = subject_class.new(client, "release-#{fault}")
        @fault = fault
        @redis = redis
        @violations = []
      end

      def name = "Redis #{@fault} after the block: #{@subject.prim}"

      def run
        work = attempts
        @violations << "the work ran #{work} times" unless work == 1
        restore
        check_left_behind
        @violations
      ensure
        restore
      end

      private

      # As a job runner would: runs the job until a call returns without raising (at most 3 times).
      def attempts
        work = 0
        3.times do
          @subject.run do
            work += 1
            break_redis
          end
          break
        rescue Ferrolock::Error => e
          @violations << "raised after the work was done: #{e.class}: #{e.message}"
          restore
        end
        work
      end

      def break_redis
        @fault == :sigstop ? @redis.pause : @redis.crash
        @broken = true
      end

      def restore
        return unless @broken

        @broken = false
        @fault == :sigstop ? @redis.resume : @redis.start
      end

      def check_left_behind
        deadline = Chaos.now + EXPIRY
        sleep 0.05 until gone? || Chaos.now > deadline
        @violations << "still held #{EXPIRY} s after Redis came back" unless gone?
        return unless @subject.is_a?(Subjects::Message)

        ran_again = false
        @subject.run { ran_again = true }
        @violations << "the message ran again" if ran_again
      end

      def gone?
        return @subject.processed? if @subject.is_a?(Subjects::Message)

        @subject.gone?
      rescue Ferrolock::ConnectionError
        false
      end
    end
  end
end
