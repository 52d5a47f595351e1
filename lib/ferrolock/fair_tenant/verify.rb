# frozen_string_literal: true

module Ferrolock
  # FairTenant.verify!: the boot-time check that every rerouting queue is fetched.
  module FairTenant
    # FairTenant extends this module.
    module Verify
      # Checks at Sidekiq server boot that every queue a rule reroutes to is fetched by this
      # process; a rerouted job on a queue nobody fetches would wait forever. Logs an ERROR per
      # missing queue and returns the problems (Strings); raises Ferrolock::Error instead with
      # strict: true. Bad rules raise ArgumentError / TypeError here, at boot (every bad class in one
      # ArgumentError when there are several).
      #
      #   Sidekiq.configure_server { |c| c.on(:startup) { Ferrolock::FairTenant.verify! } }
      #
      # job_classes: default every loaded class with fair_tenant_queues in its sidekiq_options
      # (eager-load the app first); queues: default this Sidekiq process's queues.
      def verify!(job_classes = nil, queues: nil, strict: false)
        fetched = nil.equal?(queues) ? sidekiq_queues.map(&:to_s).uniq : queue_names!(queues)
        problems = []
        errors = []
        classes_to_check(job_classes).each do |klass|
          rules = parsed_rules(klass, errors) or next
          (rules.queues.uniq - fetched).each do |queue|
            problems << "#{klass} reroutes to queue #{queue.inspect}, which this Sidekiq process does not " \
                        "fetch (it fetches #{fetched.join(", ")}): rerouted jobs would wait there forever. " \
                        "Add it to :queues (with a lower weight) or to another process."
          end
        end
        JobClasses.raise_all!(errors)
        report(problems, strict)
      end

      private

      # The class's rules, or nil (its error is collected: every bad class is reported at once).
      def parsed_rules(klass, errors)
        Rules.parse(rules_of(klass))
      rescue ArgumentError, TypeError => e
        errors << e.exception("#{klass}: #{e.message}")
        nil
      end

      def report(problems, strict)
        problems.each { |problem| Ferrolock.log(:error, "!!! ferrolock FairTenant: #{problem}") }
        raise Ferrolock::Error, problems.join("\n") if strict && !problems.empty?

        problems
      end

      def classes_to_check(job_classes)
        return JobClasses.found("fair_tenant_queues", "FairTenant.verify!") if nil.equal?(job_classes)

        job_classes!(job_classes)
      end

      # Checked before any class is: a non-class has no name to report its error under.
      def job_classes!(value)
        case value
        when Array then nil
        else raise TypeError, "job_classes must be an Array of job classes or nil, got #{Validate.show(value)}"
        end
        value.each_with_index do |klass, i|
          case klass
          when Module then nil
          else raise TypeError, "job_classes[#{i}] must be a job class, got #{Validate.show(klass)}"
          end
        end
      end

      def queue_names!(value)
        case value
        when Array then nil
        else raise TypeError, "queues must be an Array of queue names or nil, got #{Validate.show(value)}"
        end
        names = value.each_with_index.map do |queue, i|
          case queue
          when String, Symbol then Validate.text!("queues[#{i}]", queue.to_s)
          else raise TypeError, "queues[#{i}] must be a String or Symbol, got #{Validate.show(queue)}"
          end
        end
        names.uniq
      end

      def rules_of(klass)
        return nil unless klass.respond_to?(:get_sidekiq_options)

        klass.get_sidekiq_options["fair_tenant_queues"]
      end

      # Every capsule's queues on Sidekiq 7 (Sidekiq.options[:queues] on 6.4): see Sidekiq::Compat.
      def sidekiq_queues
        raise Ferrolock::Error, "verify! needs Sidekiq loaded, or queues:" unless defined?(::Sidekiq)

        Ferrolock::Sidekiq::Compat.check!
        Ferrolock::Sidekiq::Compat.fetched_queues
      end
    end

    extend Verify
  end
end
