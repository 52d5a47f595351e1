# frozen_string_literal: true

module Chaos
  module AfterWork
    # A child made by plain `fork` inside a held block leaves the block (at its end, by `exit`, or
    # never: it execs). Promise: it releases, renews and marks nothing its parent holds. Checked
    # while the parent is still inside (Redis still shows it held), at the parent's release (no
    # LockLost), and for a message, after the parent's block failed (the next copy runs).
    class ForkCase
      LEAVES = %i[end exit exec].freeze

      def initialize(client, subject_class, leave)
        @subject = subject_class.new(client, "fork-#{leave}")
        @leave = leave
        @violations = []
      end

      def name = "fork (child: #{@leave}) #{@subject.prim}"

      # A list of what went wrong (empty: every promise held).
      def run
        parent = Process.pid
        begin
          run_parent
        rescue Ferrolock::LockLost => e
          @violations << "parent got LockLost: #{e.message}"
        rescue ParentFailed
          next_copy_runs
        end
        @violations
      ensure
        Process.exit!(0) if Process.pid != parent # the child, once out of the held block
      end

      ParentFailed = Class.new(StandardError)

      private

      def run_parent
        @subject.run do
          child = fork
          if child.nil?
            raise SystemExit if @leave == :exit

            exec("true") if @leave == :exec
            next :child
          end
          Process.wait(child)
          @violations << "released by the child while the parent was inside" unless @subject.held?
          raise ParentFailed if @subject.is_a?(Subjects::Message)
        end
      end

      # The parent's job failed after the child left: the child must not have marked it processed.
      def next_copy_runs
        ran = false
        @subject.run { ran = true }
        @violations << "marked processed by the child: the failed job was lost" unless ran
      end
    end
  end
end
