# frozen_string_literal: true

module Chaos
  module Workloads
    # Shared by the workloads: a thread's loop until the run's deadline, section ids and the
    # outcome names the checker understands.
    class Base
      def initialize(journal:, client:, deadline:, thread_id:)
        @journal = journal
        @client = client
        @deadline = deadline
        @thread_id = thread_id
        @count = 0
      end

      def run
        step while Chaos.now < @deadline
      rescue StandardError => e
        @journal.write(ev: "crash", prim: prim, error: "#{e.class}: #{e.message}", t: Chaos.now)
      end

      private

      def next_id
        @count += 1
        "#{Process.pid}-#{@thread_id}-#{@count}"
      end

      # ReplicationError (a ConnectionError: too few replicas acknowledged a grant) comes first.
      OUTCOMES = {
        Ferrolock::ReplicationError => "replication", Ferrolock::LockLost => "lost",
        Ferrolock::ConnectionError => "conn",
        Ferrolock::TimeoutError => "timeout", Ferrolock::OverLimit => "overlimit"
      }.freeze

      # "ok", "lost" (LockLost: the section was reported not exclusive), "conn" (Redis
      # unreachable), "timeout", "overlimit", else "other:<class>: <message>".
      def outcome_of(error)
        return "ok" if error.nil?

        OUTCOMES.find { |klass, _| error.is_a?(klass) }&.last || "other:#{error.class}: #{error.message}"
      end

      # Block forms do not raise when the release fails once the block is over (issue 24: logged and
      # evented instead). The worker's :release_failed subscriber runs in the releasing thread and marks
      # it (Worker#run); a section whose release failed counts as "conn", as a raised one did.
      def watch_release
        Thread.current[:chaos_release_failed] = false
      end

      def release_failure
        return nil unless Thread.current[:chaos_release_failed]

        Ferrolock::ConnectionError.new("release failed after the block (:release_failed)")
      end

      def wait_record(started, limit, result)
        @journal.write(ev: "wait", prim: prim, dur: Chaos.now - started, limit: limit, result: result)
      end

      def section_start(id, name, **extra)
        @journal.write(ev: "start", prim: prim, id: id, name: name, s: Chaos.now, pid: Process.pid, **extra)
      end

      # The block's end, written before the release: a worker killed between its release (which may
      # hand the lock to another process at once) and its "end" line still shows when its section ended.
      def block_ended(id)
        ended = Chaos.now
        @journal.write(ev: "ended", id: id, e: ended)
        ended
      end

      def section_end(id, ended, error)
        @journal.write(ev: "end", id: id, e: ended, outcome: outcome_of(error))
      end

      def pause(min, max)
        sleep(min + (rand * (max - min)))
      end

      # A section's length: mostly short, but one in LONG_ONE_IN outlives the lease a few times
      # over, so renewal (and its failure during faults) is what keeps it exclusive.
      def section_pause(min, max)
        return pause(Settings::LEASE * 1.2, Settings::LEASE * 2.2) if rand(Settings::LONG_ONE_IN).zero?

        pause(min, max)
      end
    end
  end
end
