# frozen_string_literal: true

require_relative "reading"
require_relative "lease_info"

module Ferrolock
  class Admin
    # A Sidekiq uniqueness digest as Redis has it (lib/ferrolock/sidekiq/unique/):
    # - the push-time lock (`key`), whose value is the jid of the job holding it (stage :pushed:
    #   queued, scheduled or waiting for its retry; until_executed also keeps it while the job
    #   runs, renewed as a lease), with its TTL;
    # - the run-time lock on `<digest>:run`: a DistMutex (while_executing; stage :running) or a
    #   DualLock (until_and_while_executing; :running for EXEC, :waiting for WAIT), each a LeaseInfo
    #   (owner token, TTL, Holder: the job class and jid when taken inside the Sidekiq job).
    # `lock_type` is the job class's `lock` option when the class is loaded in this process, else
    # what the run-time lock's primitive tells (nil with only a push-time lock): Redis does not
    # store it. Which names are digests, and their run-time lock's name, is the core's
    # (unique_lock/inspect.rs; Native::Admin.unique_digest).
    UniqueInfo = Struct.new(:digest, :key, :job_class, :lock_type, :jid, :ttl, :running, :waiting,
                            keyword_init: true) do
      def kind
        :unique_lock
      end

      def name
        digest
      end

      # :pushed, :running, :waiting: what is held now, in that order.
      def stages
        [(:pushed if jid), (:running if running), (:waiting if waiting)].compact
      end

      def held?
        !stages.empty?
      end

      def to_h
        { kind: kind, digest: digest, key: key, job_class: job_class, lock_type: lock_type, jid: jid, ttl: ttl,
          stages: stages, running: running&.to_h, waiting: waiting&.to_h }
      end

      # The digest a lock name belongs to: the digest itself or its run-time lock's name; nil for
      # any other name.
      def self.digest_of(name)
        Native::Admin.unique_digest(name)&.last
      end

      def self.digest?(name)
        digest_of(name) == name
      end

      # The lock type whose run-time lock is this primitive.
      def self.run_lock(primitive)
        { "dist_mutex" => :while_executing, "dual_lock" => :until_and_while_executing }[primitive]
      end

      # nil when nothing of this digest is in Redis. `lock_types`: { job class name => lock type }
      # memo of the loaded classes' options (shared by a page's rows).
      def self.read(client, digest, lock_types = {})
        state = Reading.state(client, :unique_lock, digest) or return nil
        job_class = state[:job_class]
        type = lock_types.fetch(job_class) { lock_types[job_class] = configured_lock(job_class) }
        new(digest: digest, key: state[:key], job_class: job_class, lock_type: type || run_lock(state[:primitive]),
            jid: state[:jid], ttl: state[:ttl], running: LeaseInfo.from(state[:running]),
            waiting: LeaseInfo.from(state[:waiting]))
      end

      # The class's `lock` sidekiq_option (a Symbol), or nil when the class is not loaded here or
      # has none (const_get: a Rails app may autoload the class, as for the tenants page).
      def self.configured_lock(job_class)
        klass = Object.const_get(job_class)
        return nil unless klass.respond_to?(:get_sidekiq_options)

        options = klass.get_sidekiq_options
        lock = options["lock"] || options[:lock]
        case lock
        when String, Symbol then lock.to_sym
        end
      rescue NameError, ArgumentError, TypeError
        nil
      end
      private_class_method :configured_lock
    end
  end
end
