# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    module Uniqueness
      module Strategies
        # A job's perform_now under way: the locks to settle when it ends, and whether the job
        # enqueued itself again meanwhile (a retry_on retry, a continuation's resumption: both are
        # enqueued by perform_now's exception handlers, after the perform callbacks ended). One object
        # shared by the job and its copies (ActiveJob 7.x's retry_job enqueues a dup).
        class Performing
          attr_accessor :resumed

          def self.of(job)
            job.instance_variable_get(:@ferrolock_unique_performing)
          end

          # Runs the block (the job's perform_now), then each lock's settle with `resumed`, under
          # no interrupt (Thread#raise/kill, a worker's hard shutdown, may not skip them).
          def self.during(job)
            performing = new
            job.instance_variable_set(:@ferrolock_unique_performing, performing)
            yield
          ensure
            job.instance_variable_set(:@ferrolock_unique_performing, nil)
            Thread.handle_interrupt(Object => :never) { performing.settle }
          end

          def initialize
            @resumed = false
            @settles = []
          end

          def on_end(&settle)
            @settles << settle
          end

          def settle
            @settles.reverse_each { |settle| settle.call(@resumed) }
          end

          # Prepended to ActiveJob::Base with the `unique` macro.
          module PerformNow
            def perform_now
              return super unless self.class.lock_strategy_class

              Performing.during(self) { super }
            end
          end
        end
      end
    end
  end
end
