# frozen_string_literal: true

require "digest/sha2" # now: Digest::SHA256 loaded on first use can raise in one of two threads racing to it
require "json"

module Ferrolock
  module Sidekiq
    module Unique
      # What makes two jobs duplicates: the job class, the queue and the arguments (or what the
      # class's lock_args_method picks from them); without the queue with unique_across_queues, without
      # the class with unique_across_workers. ActiveJob jobs count as their wrapped class and its
      # arguments, not as Sidekiq's JobWrapper.
      module Digest
        # The payload key carrying the digest the client middleware locked, so the server side
        # releases that lock whatever changed the job since (a client middleware after ours moving
        # it to another queue, a deploy changing lock_args between push and run).
        PAYLOAD_KEY = "ferrolock_unique_digest"
        # Stands for the class in the digests of unique_across_workers jobs (no Ruby class has it).
        ANY_CLASS = "any-class"

        module_function

        # "unique:<Class>:<SHA-256 of [queue, lock args] as JSON>" (a lock name: no braces), the lock
        # args in ArgumentDigest's canonical form (hash keys sorted), as DualLock keys them.
        def for(settings, job)
          with_legacy(settings, job).first
        end

        # [digest, legacy digest or nil]. The legacy one is what this digest was before ArgumentDigest
        # (the lock args as given), when that differs (a hash out of key order): a push from a process
        # not yet upgraded locked that name, so during a rolling deploy a lock held there is honoured.
        def with_legacy(settings, job)
          args = lock_args(settings, job)
          current = digest_name(settings, json(settings, job, args, canonical: true))
          [current, ordered?(args) ? nil : digest_name(settings, json(settings, job, args, canonical: false))]
        end

        def lock_args(settings, job)
          _, args = class_and_args(job)
          case args
          when Array then nil
          else raise ArgumentError, "#{settings.class_name}: job args must be an Array, got #{Validate.show(args)}"
          end
          settings.lock_args(args)
        end

        def digest_name(settings, json)
          "unique:#{settings.across_workers? ? ANY_CLASS : settings.class_name}:#{::Digest::SHA256.hexdigest(json)}"
        end

        # (json has raised ArgumentError for what cannot be digested by now.)
        def ordered?(lock_args)
          ArgumentDigest.ordered?(lock_args)
        rescue NoMethodError
          true
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
        def json(settings, job, lock_args, canonical:)
          lock_args = ArgumentDigest.canonical(lock_args) if canonical
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
end
