# frozen_string_literal: true

require "ferrolock"
require_relative "testing/store"
require_relative "testing/token"
require_relative "testing/mutex_hold"
require_relative "testing/limiter_slot"
require_relative "testing/dual_lock_ticket"
require_relative "testing/message_lease"
require_relative "testing/job_slot"
require_relative "testing/switch"
require_relative "testing/fake/dist_mutex"
require_relative "testing/fake/concurrent_limiter"
require_relative "testing/fake/rate_limiter"
require_relative "testing/fake/dual_lock"
require_relative "testing/fake/fair_tenant"
require_relative "testing/fake/unique_lock"
require_relative "testing/fake/key_lock"
require_relative "testing/fake/message_lock"
require_relative "testing/fake/job_concurrency"
require_relative "testing/disabled"

module Ferrolock
  # Test modes for apps' own test suites, shaped like Sidekiq::Testing. Requiring this file turns
  # fake mode on:
  #
  #   require "ferrolock/testing"
  #   Ferrolock::Testing.fake!      # state in process memory, time from Time.now: no Redis
  #   Ferrolock::Testing.disable!   # every lock granted; middlewares pass jobs through untouched
  #   Ferrolock::Testing.real!      # Redis again
  #   Ferrolock::Testing.real! { ... }  # each takes a block: the previous mode comes back after it
  #   Ferrolock::Testing.reset!     # forgets the fake state (spec helpers do it before each test)
  #
  # The mode is read at every call, not when a primitive is made: a limiter in a constant follows
  # it. Primitives made before this file was required talk to Redis whatever the mode: require it
  # before the app is loaded.
  module Testing
    MODES = %i[real fake disabled].freeze

    @mode = :fake
    @store = Store.new

    class << self
      # The mode in force: :real, :fake or :disabled.
      attr_reader :mode

      # The fake backends' in-memory state.
      attr_reader :store

      def fake!(&block)
        switch(:fake, &block)
      end

      def disable!(&block)
        switch(:disabled, &block)
      end

      def real!(&block)
        switch(:real, &block)
      end

      # fake!, disable! or real! by name: :fake, :disable (or :disabled) or :real (RSpec metadata).
      def use(mode, &block)
        case mode
        when :fake then fake!(&block)
        when :disable, :disabled then disable!(&block)
        when :real then real!(&block)
        else raise ArgumentError, "mode must be :fake, :disable or :real, got #{Validate.show(mode)}"
        end
      end

      def fake?
        @mode == :fake
      end

      def disabled?
        @mode == :disabled
      end

      def real?
        @mode == :real
      end

      # Forgets every fake lock, slot, count and marker (held ones too: their release then reports
      # them lost), and FairTenant's warnings and pauses. Waiting threads see the empty state.
      def reset!
        @store.reset!
        FairTenant.reset!
        nil
      end

      # reset! as a test begins (the RSpec and Minitest helpers), on the thread that runs the tests:
      # also forgets the fake and disabled holds that thread's last test left, so that a DistMutex
      # kept in a constant is not still owned (ThreadError "deadlock; recursive locking" at lock).
      def reset_for_test!
        reset!
        DistMutex::Owners.forget_held_by(Thread.current) { |ownership| ownership.hold.is_a?(Token) }
        nil
      end

      # The time the fake backends read (so ActiveSupport's travel and Timecop move it).
      def now
        Time.now.to_f
      end

      # Backend's factory: a Switch following the mode.
      def build(kind, client, *args)
        Switch.new(kind, client, args)
      end

      # Backend's factory: FairTenant's check in the mode in force.
      def fair_tenant_check(client, rules, *args)
        case @mode
        when :fake then Fake::FairTenant.check(@store, client, rules, *args)
        when :disabled then 0
        else Native::FairTenant.check(client.native, rules.native, *args)
        end
      end

      # Backend's factory: true while disabled.
      def pass_through?
        @mode == :disabled
      end

      private

      def switch(mode)
        unless block_given?
          @mode = mode
          return self
        end

        previous = @mode
        @mode = mode
        begin
          yield
        ensure
          @mode = previous
        end
      end
    end

    Backend.factory = self
  end
end
