# frozen_string_literal: true

require "logger"

module Demo
  # Loads the REAL, unmodified Shoryuken 6.2.1 vendored next to the project (bin/demo and
  # bin/bench use it) the way spec/support/real_shoryuken_boot.rb does: Debian's aws-sdk-core,
  # an `Aws::SQS::Client` constant (aws-sdk-sqs is not installable here; Shoryuken needs only the
  # constant) and the spec's fake SQS client (spec/support/fake_sqs_client.rb) as
  # Shoryuken.sqs_client. When it cannot be loaded, callers fall back to the spec's stand-in
  # chain (spec/support/shoryuken_chain.rb) and say why.
  module RealShoryuken
    DIR = File.expand_path("../../shared/vendor/shoryuken-6.2.1", __dir__)

    class << self
      # nil once the real Shoryuken is loaded (loads it the first time), else why it is not.
      def missing
        @missing = load_real unless defined?(@missing)
        @missing
      end

      # The fake SQS client Shoryuken talks to (after a successful #missing).
      attr_reader :sqs

      # A real Shoryuken::Message for delivery `data` (FakeSqsClient#deliver), as Shoryuken's
      # fetcher builds it from a receive_message reply.
      def message(queue, data)
        Shoryuken::Message.new(sqs, Shoryuken::Client.queues(queue), data)
      end

      # Receipt handles Shoryuken (AutoDelete's batch delete) and the Lock (Message#delete) deleted.
      def deleted_receipts
        single = sqs.calls_to(:delete_message).map { |params| params[:receipt_handle] }
        batch = sqs.calls_to(:delete_message_batch).flat_map { |p| p[:entries].map { |e| e[:receipt_handle] } }
        single + batch
      end

      private

      def load_real
        return "vendored Shoryuken 6.2.1 not found at #{DIR}" unless File.directory?(File.join(DIR, "lib"))
        return "a Shoryuken stand-in is already loaded" if defined?(::Shoryuken) && !defined?(::Shoryuken::VERSION)

        begin
          require "aws-sdk-core"
        rescue LoadError => e
          # Debian's aws-sdk-core is not in the Gemfile: `bundle exec` hides it.
          return "aws-sdk-core cannot be required (#{e.message}; run outside `bundle exec`)"
        end
        boot
        nil
      rescue LoadError, StandardError => e
        "the vendored Shoryuken failed to load (#{e.class}: #{e.message})"
      end

      def boot
        ::Aws.const_set(:SQS, Module.new) unless ::Aws.const_defined?(:SQS, false)
        ::Aws::SQS.const_set(:Client, Class.new) unless ::Aws::SQS.const_defined?(:Client, false)
        $LOAD_PATH.unshift(File.join(DIR, "lib"))
        require "shoryuken"
        require_relative "../spec/support/fake_sqs_client"
        # Shoryuken logs every message at INFO (as in production); here to nowhere.
        ::Shoryuken::Logging.logger = Logger.new(File::NULL)
        @sqs = FerrolockTest::FakeSqsClient.new
        ::Shoryuken.sqs_client = @sqs
      end
    end
  end
end
