# frozen_string_literal: true

require_relative "unsupported"
require_relative "option_names"

module Ferrolock
  module Sidekiq
    module Unique
      # A job class's uniqueness options (sidekiq-unique-jobs' names), validated:
      #
      #   sidekiq_options lock: :until_executed,     # see LOCKS
      #                   ttl: 3600,                 # seconds a pushed, not yet started job keeps its lock
      #                   wait_timeout: 0,           # seconds a run waits for a running duplicate
      #                   lease: 30,                 # lease of a running job's lock (renewed while it runs)
      #                   lock_args_method: :lock_args, # class method (or Proc) picking the arguments to
      #                                                 # digest; a class method lock_args is used by default
      #                   on_conflict: :log,         # or { client: :replace, server: :reschedule }
      #                   unique_across_queues: false, # true: the queue is not part of the digest
      #                   unique_across_workers: false # true: nor is the job class
      #
      # (ttl, wait_timeout and lease have other names too: see Unique::OptionNames.)
      #
      # Every error names the job class and the option, so a typo fails the first push loudly instead
      # of silently enqueueing duplicates.
      class Settings
        LOCKS = %i[until_executing until_executed until_expired while_executing until_and_while_executing].freeze
        # Locks taken when the job is pushed (client middleware) / when it runs (server middleware).
        PUSH_LOCKS = %i[until_executing until_executed until_expired until_and_while_executing].freeze
        CLIENT_STRATEGIES = %i[log raise reject replace reschedule].freeze
        SERVER_STRATEGIES = %i[log raise reject reschedule].freeze
        # A day: a queue backlog longer than that is an incident of its own, and a job deleted by hand
        # from a queue (whose lock nobody releases) blocks its duplicates for a day at most.
        DEFAULT_LOCK_TTL = 86_400
        DEFAULT_LOCK_LEASE = 30
        DEFAULT_CLIENT_CONFLICT = :log
        DEFAULT_SERVER_CONFLICT = :reschedule
        DEFAULT_LOCK_ARGS_METHOD = :lock_args
        OPTIONS = (%w[lock lock_args_method on_conflict unique_across_queues unique_across_workers] +
                   Unique::OptionNames::NAMES).freeze

        attr_reader :class_name, :lock, :ttl, :wait_timeout, :lease, :client_conflict, :server_conflict

        # nil when the job does not ask for a lock. The job hash's options win over the class's, as in
        # sidekiq-unique-jobs: Sidekiq copies the class's sidekiq_options into the job at push and
        # `MyJob.set(ttl: 60)` / `Sidekiq::Client.push("ttl" => 60, ...)` add per-push ones,
        # so the payload carries what the client used and the server middleware reads the same.
        # Nothing is cached: a per-push value applies to its job only.
        def self.for(job_class, job)
          Unique::Unsupported.refuse!(job_class)
          options, pushed = options_of(job_class, job)
          raw_lock = options["lock"]
          return nil if nil.equal?(raw_lock) || false.equal?(raw_lock)

          new(job_class, options, pushed: pushed)
        end

        # [the options (the job's over the class's), names of those the job sets differently].
        def self.options_of(job_class, job)
          own = Validate.responds_to?(job_class, :get_sidekiq_options) ? job_class.get_sidekiq_options : {}
          pushed = []
          options = OPTIONS.each_with_object({}) do |name, merged|
            mine = option(own, name)
            given = pushed_option(job, name, mine)
            merged[name] = nil.equal?(given) ? mine : given
            pushed << name unless nil.equal?(given) || plain(given) == plain(mine)
          end
          [Unique::OptionNames.one_name_each(options.compact, pushed), pushed]
        end

        def self.option(source, name)
          source.fetch(name) { source[name.to_sym] }
        end

        # The job hash's value of an option, nil when it has none of its own.
        def self.pushed_option(job, name, mine)
          given = option(job, name)
          name == "lock_args_method" && own_proc?(mine, given) ? nil : given
        end

        # A Proc cannot travel in the payload: the class's own Proc (at push) or what JSON made of it
        # ("#<Proc:0x...>", on the server) means "the class's lock_args_method".
        def self.own_proc?(mine, given)
          return false unless Proc === mine # rubocop:disable Style/CaseEquality -- options may hold a BasicObject

          given.equal?(mine) || (String === given && given.start_with?("#<Proc:")) # rubocop:disable Style/CaseEquality
        end

        # A value as it reads back from the JSON payload (Symbols as Strings), to compare.
        def self.plain(value)
          case value
          when Symbol then value.to_s
          when Hash then value.to_h { |key, inner| [key.to_s, plain(inner)] }
          else value
          end
        end

        # pushed: names of options the job hash set (named so in errors: the class may be fine).
        def initialize(job_class, options, pushed: [])
          @job_class = job_class
          @pushed = pushed
          @class_name = Validate.text!(:class, Module === job_class ? job_class.name.to_s : job_class.to_s) # rubocop:disable Style/CaseEquality
          @lock = one_of("lock", options["lock"], LOCKS)
          @ttl = seconds(*Unique::OptionNames.pick(options, "ttl", DEFAULT_LOCK_TTL, @class_name))
          @wait_timeout = seconds(*Unique::OptionNames.pick(options, "wait_timeout", 0, @class_name), allow_zero: true)
          @lease = seconds(*Unique::OptionNames.pick(options, "lease", DEFAULT_LOCK_LEASE, @class_name))
          @lock_args_method = lock_args_method(options["lock_args_method"])
          @across_queues = flag("unique_across_queues", options["unique_across_queues"])
          @across_workers = flag("unique_across_workers", options["unique_across_workers"])
          conflicts(options["on_conflict"])
        end

        def push_lock?
          PUSH_LOCKS.include?(@lock)
        end

        # unique_across_queues: duplicates whatever queue they were pushed to.
        def across_queues?
          @across_queues
        end

        # unique_across_workers: duplicates whatever their class (among classes that say so too).
        def across_workers?
          @across_workers
        end

        # The arguments that make two jobs duplicates: all of them, or what lock_args_method returns.
        def lock_args(args)
          return args if @lock_args_method.nil?

          method = @lock_args_method
          value = method.respond_to?(:call) ? method.call(args) : @job_class.public_send(method, args)
          Array === value ? value : [value] # rubocop:disable Style/CaseEquality -- whatever the method returned
        rescue ForeignError
          raise # an outer timeout keeps its class, or the Timeout.timeout that sent it would miss it
        rescue StandardError => e
          raise Ferrolock::Error, "#{@class_name} lock_args_method raised #{e.class}: #{e.message}"
        end

        private

        # A String is compared, not converted with to_sym (which raises EncodingError on invalid UTF-8).
        def one_of(name, value, allowed)
          symbol = OptionCheck.symbol_in(value, allowed)
          return symbol if symbol

          raise ArgumentError, "#{@class_name}: #{source(name)} #{name}: must be one of " \
                               "#{allowed.map(&:inspect).join(", ")}, got #{Validate.show(value)}"
        end

        # true or false (nil: false). Strings are refused: "false" would read as true.
        def flag(name, value)
          return value if true.equal?(value) || false.equal?(value)
          return false if nil.equal?(value)

          raise ArgumentError, "#{@class_name}: #{source(name)} #{name}: must be true or false, " \
                               "got #{Validate.show(value)}"
        end

        def seconds(name, value, allow_zero: false)
          OptionCheck.value("#{@class_name}: #{source(name)}") do
            Validate.seconds!(name, value, allow_zero: allow_zero)
          end
        end

        # Where a bad value came from: the class's sidekiq_options, or the job hash of this push.
        def source(name)
          @pushed.include?(name.split.first) ? "per-push option" : "sidekiq_options"
        end

        # A Symbol/String naming a class method of the job class, or a Proc; called with the job's
        # argument Array.
        def lock_args_method(value)
          # As sidekiq-unique-jobs: a class method lock_args is used without being named.
          return default_lock_args_method if nil.equal?(value)

          # A Proc cannot travel in the job payload to the server: per push, only a method name.
          per_push = @pushed.include?("lock_args_method")
          case value
          when Proc then return value unless per_push
          when Symbol, String then return method_name(value) unless value.empty?
          end

          allowed = per_push ? "" : ", or a Proc"
          raise ArgumentError, "#{@class_name}: #{source("lock_args_method")} lock_args_method: must be a Symbol or " \
                               "String naming a class method#{allowed}, got #{Validate.show(value)}"
        end

        def default_lock_args_method
          DEFAULT_LOCK_ARGS_METHOD if @job_class.respond_to?(DEFAULT_LOCK_ARGS_METHOD)
        end

        # The job class may be known by name only (a client without the class): checked where it runs.
        def method_name(value)
          value = checked_method_name(value)
          return value unless @job_class.is_a?(Module) && !@job_class.respond_to?(value)

          raise ArgumentError, "#{@class_name}: #{source("lock_args_method")} lock_args_method: #{@class_name} has " \
                               "no class method #{Validate.show(value.to_s)}"
        end

        def known_sides!(sides)
          unknown = sides - %w[client server]
          return if unknown.empty?

          # (inspect escapes a side in any encoding; join would raise on mixed ones)
          raise ArgumentError, "#{@class_name}: #{source("on_conflict")} on_conflict: unknown side " \
                               "#{unknown.map { |side| side.inspect[1..-2] }.join(", ")} (known: client, server)"
        end

        # A Symbol, or a String of valid UTF-8 as a Symbol (to_sym raises EncodingError on others).
        def checked_method_name(value)
          return value if Symbol === value # rubocop:disable Style/CaseEquality

          OptionCheck.value("#{@class_name}: #{source("lock_args_method")}") do
            Validate.text!(:lock_args_method, value).to_sym
          end
        end

        def conflicts(value)
          if Hash === value # rubocop:disable Style/CaseEquality -- value may be a BasicObject
            sides = value.transform_keys(&:to_s)
            known_sides!(sides.keys)
            @client_conflict = one_of("on_conflict client", sides.fetch("client", DEFAULT_CLIENT_CONFLICT),
                                      CLIENT_STRATEGIES)
            @server_conflict = one_of("on_conflict server", sides.fetch("server", DEFAULT_SERVER_CONFLICT),
                                      SERVER_STRATEGIES)
          else
            @client_conflict = one_of("on_conflict", value || DEFAULT_CLIENT_CONFLICT, CLIENT_STRATEGIES)
            # :replace has no meaning for a job already running: the server side then reschedules.
            server = nil.equal?(value) || [:replace, "replace"].include?(value) ? DEFAULT_SERVER_CONFLICT : value
            @server_conflict = one_of("on_conflict", server, SERVER_STRATEGIES)
          end
        end
      end
    end
  end
end
