# frozen_string_literal: true

module Ferrolock
  # FairTenant.verify!: the boot-time check that every rerouting queue is fetched.
  module FairTenant
    class << self
      # Checks at Sidekiq server boot that every queue a rule reroutes to is fetched by this
      # process; a rerouted job on a queue nobody fetches would wait forever. Logs an ERROR per
      # missing queue and returns the problems (Strings); raises Ferrolock::Error instead with
      # strict: true. Bad rules raise ArgumentError / TypeError here, at boot.
      #
      #   Sidekiq.configure_server { |c| c.on(:startup) { Ferrolock::FairTenant.verify! } }
      #
      # job_classes: default every loaded class with fair_tenant_queues in its sidekiq_options
      # (eager-load the app first); queues: default this Sidekiq process's queues.
      def verify!(job_classes = nil, queues: nil, strict: false)
        fetched = (queues || sidekiq_queues).map(&:to_s).uniq
        problems = []
        (job_classes || JobClasses.with_option("fair_tenant_queues")).each do |klass|
          rules = Rules.parse(rules_of(klass)) or next
          (rules.queues.uniq - fetched).each do |queue|
            problems << "#{klass} reroutes to queue #{queue.inspect}, which this Sidekiq process does not " \
                        "fetch (it fetches #{fetched.join(", ")}): rerouted jobs would wait there forever. " \
                        "Add it to :queues (with a lower weight) or to another process."
          end
        end
        report(problems, strict)
      end

      private

      def report(problems, strict)
        problems.each { |problem| Ferrolock.logger.error("!!! ferrolock FairTenant: #{problem}") }
        raise Ferrolock::Error, problems.join("\n") if strict && !problems.empty?

        problems
      end

      def rules_of(klass)
        raise TypeError, "job_classes must hold classes, got #{klass.inspect}" unless klass.is_a?(Module)
        return nil unless klass.respond_to?(:get_sidekiq_options)

        klass.get_sidekiq_options["fair_tenant_queues"]
      end

      # Sidekiq 6 keeps the fetched queues (repeated by weight) in Sidekiq.options; Sidekiq 7 in
      # its default configuration.
      def sidekiq_queues
        raise Ferrolock::Error, "verify! needs Sidekiq loaded, or queues:" unless defined?(::Sidekiq)

        config = ::Sidekiq.respond_to?(:default_configuration) ? ::Sidekiq.default_configuration : ::Sidekiq.options
        Array(config[:queues])
      end
    end
  end
end
