# frozen_string_literal: true

module Ferrolock
  module Sidekiq
    module Unique
      # sidekiq-unique-jobs options (v5 to v8) that ferrolock does not implement, each with what to
      # use instead. A class declaring one is refused (ArgumentError at its first push, or at boot)
      # rather than locked differently from what its author expects.
      module Unsupported
        OPTIONS = {
          "lock_prefix" => "the lock's key is <namespace>:{<digest>}:lock; set Ferrolock's namespace instead",
          "lock_info" => "the Web tab and `ferrolock uniques` show every lock's holder",
          "lock_limit" => "one job per digest runs; use a ConcurrentLimiter for more",
          "unique" => "use lock:",
          "unique_args" => "use lock_args_method:",
          "unique_prefix" => "set Ferrolock's namespace instead",
          "lock_expiration" => "use ttl:",
          "unique_expiration" => "use ttl:",
          "run_lock_expiration" => "use lease:",
          "unique_on_all_queues" => "use unique_across_queues:",
          "log_duplicate_payload" => "duplicates are logged with their jid and digest"
        }.freeze

        module_function

        # The loaded job classes declaring any of them, for the boot check (validate!).
        def declaring_classes
          OPTIONS.keys.flat_map { |name| JobClasses.with_option(name) }.uniq
        end

        # Raises ArgumentError naming the first such option the class declares. Only the class's own
        # declaration is read: payloads pushed by sidekiq-unique-jobs before a switch carry some of
        # these keys (lock_prefix...) and must still run.
        def refuse!(job_class)
          return unless Validate.responds_to?(job_class, :get_sidekiq_options)

          own = job_class.get_sidekiq_options
          name, hint = OPTIONS.find { |key, _| !nil.equal?(own.fetch(key) { own[key.to_sym] }) }
          return if name.nil?

          raise ArgumentError, "#{job_class.name || job_class.inspect}: sidekiq_options #{name}: is a " \
                               "sidekiq-unique-jobs option that ferrolock does not implement (#{hint}); remove it"
        end
      end
    end
  end
end
