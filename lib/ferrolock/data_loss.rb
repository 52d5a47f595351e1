# frozen_string_literal: true

module Ferrolock
  # Reports that Redis lost ferrolock's data: an ERROR line and a :data_lost event naming what this
  # process lost with it. The client's watchdog finds it (ext/ferrolock-core/src/data_loss.rs): the
  # server changed (run_id: a restart, a failover) or evicted keys while leases this process held
  # or jobs it parked are gone. Other processes report what they lost themselves.
  module DataLoss
    CAUSES = {
      restart: "Redis restarted without ferrolock's data: no persistence, or an old snapshot",
      failover: "another server answers (a failover) without data written before: a replica that missed writes",
      eviction: "Redis evicted ferrolock's keys (maxmemory reached, maxmemory-policy is not noeviction)"
    }.freeze
    # Parked job ids named in the log line at most (the event names all).
    LOGGED_JOBS = 20

    class << self
      # From the watchdog's notice: whether data was lost (false: the server changed and kept it,
      # an INFO line only), cause name, the server, [[primitive, name, fence, queue], ...] and
      # [[key, job_id], ...].
      def report(lost, cause, redis, leases, parked)
        return kept(redis) unless lost

        cause = cause.to_sym
        holds = leases.map { |lease| LockLostWatcher.payload(*lease).except(:detected) }
        jobs = parked.map { |key, job_id| { name: key, job_id: job_id } }
        Ferrolock.log(:error, message(cause, redis, holds, jobs))
        Ferrolock.instrument(:data_lost, cause: cause, redis: redis, lost: holds, parked: jobs)
      end

      private

      def kept(redis)
        Ferrolock.log(:info, "ferrolock: Redis at #{redis} changed (run_id: a failover or a restart) and kept " \
                             "ferrolock's data: every hold and parked job of this process is still there")
      end

      def message(cause, redis, lost, jobs)
        "ferrolock: Redis at #{redis} lost ferrolock's data (#{cause}: #{CAUSES.fetch(cause, cause)}). " \
          "This process lost #{held(lost)} and #{parked(jobs)}. A lost lock or slot may now be taken by " \
          "another holder while its job still runs; blocked jobs live only in Redis: set appendonly yes " \
          "and maxmemory-policy noeviction (README: Where blocked jobs live)."
      end

      def held(lost)
        return "no lock or slot" if lost.empty?

        names = lost.map { |hold| hold_name(hold) }.join(", ")
        "#{lost.size} #{lost.size == 1 ? "lock/slot" : "locks/slots"} (#{names})"
      end

      # dist_mutex "report:42" fencing token 7
      def hold_name(hold)
        fence = hold[:fencing_token] ? " fencing token #{hold[:fencing_token]}" : ""
        "#{hold[:primitive]} #{(hold[:name] || hold[:key] || hold[:message_id]).inspect}#{fence}"
      end

      def parked(jobs)
        return "no parked job" if jobs.empty?

        listed = jobs.first(LOGGED_JOBS).group_by { |job| job[:name] }.map do |key, of_key|
          "#{key.inspect}: #{of_key.map { |job| job[:job_id] }.join(" ")}"
        end
        more = jobs.size > LOGGED_JOBS ? " and #{jobs.size - LOGGED_JOBS} more" : ""
        what = jobs.size == 1 ? "blocked job" : "blocked jobs"
        "#{jobs.size} #{what} it parked (limits_concurrency #{listed.join("; ")}#{more})"
      end
    end
  end
end
