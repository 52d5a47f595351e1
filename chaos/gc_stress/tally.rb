# frozen_string_literal: true

module Chaos
  module GcStress
    # Raised into workers at random moments by the storm thread. A StandardError, as most apps'
    # own exceptions are (so ferrolock's rescue clauses meet it, not only Interrupt).
    class StormError < StandardError; end

    # What every operation ended with, per workload and operation, and the unexpected exceptions
    # (class, message, where). Shared by the threads of one process.
    class Tally
      # Outcomes that a storm of Thread#raise / Timeout / short waits makes normal.
      EXPECTED = %i[ok skipped interrupted timed_out].freeze
      # How many unexpected exceptions are kept with their backtrace.
      KEEP = 20

      def initialize
        @lock = Mutex.new
        @counts = Hash.new { |h, k| h[k] = Hash.new(0) }
        @unexpected = []
        @problems = []
      end

      def count(load, action, outcome)
        @lock.synchronize { @counts["#{load}.#{action}"][outcome] += 1 }
      end

      # An exception no storm explains (a panic turned into Ferrolock::Error, a TypeError...).
      def unexpected(load, action, error)
        @lock.synchronize do
          @counts["#{load}.#{action}"][:unexpected] += 1
          next if @unexpected.size >= KEEP

          @unexpected << { where: "#{load}.#{action}", error: "#{error.class}: #{error.message}",
                           backtrace: (error.backtrace || []).first(12) }
        end
      end

      # A broken promise (two holders, a fork that released its parent's lock...).
      def problem(text)
        @lock.synchronize { @problems << text if @problems.size < KEEP * 5 }
        warn "gc_stress: PROBLEM: #{text}"
      end

      def problems
        @lock.synchronize { @problems.dup }
      end

      def unexpected_errors
        @lock.synchronize { @unexpected.dup }
      end

      def operations
        @lock.synchronize { @counts.values.sum { |h| h.values.sum } }
      end

      def to_h
        @lock.synchronize do
          { counts: @counts.transform_values(&:dup), unexpected: @unexpected.dup, problems: @problems.dup }
        end
      end
    end

    # Counts the holders of each kind of section at once and records a count above the kind's
    # limit (a DistMutex section seen by 2 threads, a limiter by more than its count).
    class Sections
      def initialize(tally, limits)
        @tally = tally
        @limits = limits
        @inside = Hash.new(0)
        @most = Hash.new(0)
        @lock = Mutex.new
      end

      # Runs the block as one holder of `kind`. The bookkeeping runs with asynchronous exceptions
      # deferred, so a Thread#raise can land in the block but never between the count and its undo.
      def hold(kind, &block)
        Thread.handle_interrupt(Object => :never) do
          enter(kind)
          begin
            Thread.handle_interrupt(Object => :immediate, &block)
          ensure
            leave(kind)
          end
        end
      end

      def most
        @lock.synchronize { @most.dup }
      end

      private

      def enter(kind)
        inside = @lock.synchronize do
          n = (@inside[kind] += 1)
          @most[kind] = n if n > @most[kind]
          n
        end
        limit = @limits.fetch(kind)
        @tally.problem("#{kind}: #{inside} holders at once (limit #{limit})") if inside > limit
      end

      def leave(kind)
        @lock.synchronize { @inside[kind] -= 1 }
      end
    end
  end
end
