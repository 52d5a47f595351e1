# frozen_string_literal: true

require "digest/sha2" # now: Digest::SHA256 loaded on first use can raise in one of two threads racing to it
require "json"

module Ferrolock
  module Sidekiq
    # What makes two jobs duplicates: the job class, the queue and the arguments (or what the
    # class's lock_args_method picks from them); without the queue with unique_across_queues, without
    # the class with unique_across_workers. ActiveJob jobs count as their wrapped class and its
    # arguments, not as Sidekiq's JobWrapper.
    module UniqueDigest
      # The payload key carrying the digest the client middleware locked, so the server side
      # releases that lock whatever changed the job since (a client middleware after ours moving
      # it to another queue, a deploy changing lock_args between push and run).
      PAYLOAD_KEY = "ferrolock_unique_digest"
      # Stands for the class in the digests of unique_across_workers jobs (no Ruby class has it).
      ANY_CLASS = "any-class"

      module_function

      # "unique:<Class>:<SHA-256 of [queue, lock args] as JSON>" (a lock name: no braces).
      def for(settings, job)
        _, args = class_and_args(job)
        case args
        when Array then nil
        else raise ArgumentError, "#{settings.class_name}: job args must be an Array, got #{Validate.show(args)}"
        end

        owner = settings.across_workers? ? ANY_CLASS : settings.class_name
        "unique:#{owner}:#{Digest::SHA256.hexdigest(json(settings, job, settings.lock_args(args)))}"
      end

      # The digest the job carries (set at push), else the one computed from it now.
      def carried(settings, job)
        digest = job[PAYLOAD_KEY]
        return digest if String === digest && digest.start_with?("unique:") && # rubocop:disable Style/CaseEquality
                         digest.valid_encoding? && !digest.match?(/[{}]/)

        self.for(settings, job)
      end

      # The queue the job was pushed to: before FairTenant rerouted it (kept in fair_tenant_origin),
      # so a rerouted job and its duplicates share a digest whichever middleware runs first.
      def queue(job)
        (job["fair_tenant_origin"] || job["queue"]).to_s
      end

      # Sidekiq would fail to store such arguments too (NaN, Infinity, objects without JSON).
      def json(settings, job, lock_args)
        JSON.generate([settings.across_queues? ? nil : queue(job), lock_args])
      rescue JSON::GeneratorError, NoMethodError => e
        raise ArgumentError, "#{settings.class_name}: job args cannot be digested as JSON: #{e.message[0, 200]}"
      end

      # [job class (a Class when loaded here, else its name), arguments] (Ferrolock::Job.from_sidekiq,
      # whose TypeErrors name the bad part of a garbage payload).
      def class_and_args(job, job_class = nil)
        model = Job.from_sidekiq(job, job_class)
        [model.job_class, model.arguments]
      end

      # An ActiveJob job through Sidekiq: its class is the wrapper, its argument ActiveJob's data.
      def active_job?(job)
        Job.from_sidekiq(job).active_job?
      end
    end
  end
end
