# frozen_string_literal: true

require_relative "reading"
require_relative "holder"
require_relative "dual_lock_info"

module Ferrolock
  class Admin
    # A Sidekiq uniqueness digest as Redis has it (lib/ferrolock/sidekiq/unique/):
    # - the push-time lock `<ns>:{<digest>}:lock`, whose value is the jid of the job holding it
    #   (stage :pushed: queued, scheduled or waiting for its retry; until_executed also keeps it
    #   while the job runs, renewed as a lease), with its TTL;
    # - the run-time lock on `<digest>:run`: a DistMutex (while_executing; stage :running) or a
    #   DualLock (until_and_while_executing; :running for EXEC, :waiting for WAIT), each a Stage
    #   (owner token, TTL, Holder: the job class and jid when taken inside the Sidekiq job).
    # `lock_type` is the job class's `lock` option when the class is loaded in this process, else
    # what the run-time lock's primitive tells (nil with only a push-time lock): Redis does not
    # store it.
    # Unique::Digest.for's names: "unique:<class>:<SHA-256 hex>"; the run-time lock's name adds ":run".
    UNIQUE_DIGEST = /\Aunique:(?<job_class>.+):\h{64}\z/m
    UNIQUE_RUN_SUFFIX = ":run"

    # The lock type whose run-time lock is this primitive.
    UNIQUE_RUN_LOCKS = { dist_mutex: :while_executing, dual_lock: :until_and_while_executing }.freeze

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

      # The digest a lock name belongs to: the digest itself or its `<digest>:run`; nil for any
      # other name (Unique::Digest.for makes "unique:<class>:<SHA-256 hex>").
      def self.digest_of(name)
        return name if digest?(name)

        base = name.delete_suffix(UNIQUE_RUN_SUFFIX)
        base != name && digest?(base) ? base : nil
      end

      def self.digest?(name)
        UNIQUE_DIGEST.match?(name)
      end

      def self.job_class(digest)
        UNIQUE_DIGEST.match(digest)&.[](:job_class)
      end

      # nil when nothing of this digest is in Redis. `lock_types`: { job class name => lock type }
      # memo of the loaded classes' options (shared by a page's rows).
      def self.read(client, keys, digest, lock_types = {})
        return nil unless digest?(digest)

        key = keys.key(digest, "lock")
        jid = client.call("GET", key)
        running, waiting, primitive = run_stages(client, keys, "#{digest}#{UNIQUE_RUN_SUFFIX}")
        return nil if jid.nil? && primitive.nil?

        job_class = job_class(digest)
        type = lock_types.fetch(job_class) { lock_types[job_class] = configured_lock(job_class) }
        new(digest: digest, key: key, job_class: job_class, lock_type: type || UNIQUE_RUN_LOCKS[primitive], jid: jid,
            ttl: jid && Reading.ttl(client.call("PTTL", key)), running: running, waiting: waiting)
      end

      # [running Stage, waiting Stage, :dist_mutex / :dual_lock / nil] of the run-time lock.
      def self.run_stages(client, keys, run)
        mutex = Stage.read(client, keys, run, "lock")
        return [mutex, nil, :dist_mutex] if mutex

        exec = Stage.read(client, keys, run, "exec")
        wait = Stage.read(client, keys, run, "wait")
        [exec, wait, (:dual_lock if exec || wait)]
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
      private_class_method :run_stages, :configured_lock
    end
  end
end
