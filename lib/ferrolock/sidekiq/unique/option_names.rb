# frozen_string_literal: true

module Ferrolock
  module Sidekiq
    module Unique
      # The uniqueness options that have two names: ttl, wait_timeout and lease (the vocabulary of the
      # README) are also accepted as lock_ttl and lock_timeout, sidekiq-unique-jobs' names, without a
      # warning (the README promises its option names to those who switch), and as lock_lease,
      # ferrolock's own older name of lease, which is deprecated (warned once per job class).
      module OptionNames
        # New name => [its other name, whether that name is deprecated].
        RENAMED = { "ttl" => ["lock_ttl", false], "wait_timeout" => ["lock_timeout", false],
                    "lease" => ["lock_lease", true] }.freeze
        NAMES = RENAMED.flat_map { |new, (old, _)| [new, old] }.freeze

        module_function

        # Sidekiq copies the class's options into the payload, so `MyJob.set(ttl: 60)` on a class with
        # lock_ttl: leaves both names: the one pushed wins. Both from the same place stay (and are refused).
        def one_name_each(options, pushed)
          RENAMED.each do |new, (old, _)|
            next unless options.key?(new) && options.key?(old)

            from_class = [new, old].reject { |name| pushed.include?(name) }
            options.delete(from_class.first) if from_class.size == 1
          end
          options
        end

        # [the name the option was given under, its value] (the new name and default when not given).
        # Raises ArgumentError (naming both) when both names are given.
        def pick(options, new, default, class_name)
          old, deprecated = RENAMED.fetch(new)
          return [new, options.fetch(new, default)] unless options.key?(old)
          raise ArgumentError, "#{class_name}: give #{new} or #{old}, not both (the same option)" if options.key?(new)

          Deprecation.warn_once("#{class_name} sidekiq_options", old, new) if deprecated
          [old, options[old]]
        end
      end
    end
  end
end
