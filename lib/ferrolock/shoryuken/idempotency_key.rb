# frozen_string_literal: true

require "digest/sha2" # now: Digest::SHA256 loaded on first use can raise in one of two threads racing to it

module Ferrolock
  module Shoryuken
    # The `idempotency_key` option at work: the key a message is locked on instead of its SQS
    # message id, so that two messages carrying one job (a producer's retry sends a second message,
    # with a second message id) run once. Where it is nil, the message id keys the lock.
    module IdempotencyKey
      # Keys this long or with braces (which would break the Redis key's hash tag) are locked on
      # their SHA-256.
      MAX_PLAIN = 200

      module_function

      # Adds :idempotency_key to an event payload when the message has one.
      def add_to(payload, source, sqs_msg, body)
        key = key_of(source, sqs_msg, body)
        payload[:idempotency_key] = key if key
        payload
      end

      # The id the lock is taken on: the key's (or, for a job resuming itself, the key's and the resumed
      # message's: Resumption), else the message id.
      def lock_id_of(payload)
        key = payload[:idempotency_key]
        return payload[:message_id] unless key

        resumes = payload[:resumes]
        resumes ? Resumption.lock_id(resumes, lock_id(key)) : lock_id(key)
      end

      # The key of sqs_msg under the option `source` (a Proc/Method, an attribute name, nil), or nil
      # for "its message id". A Proc returning anything but a non-empty String or nil is raised as
      # ArgumentError naming the option (the message is not run; SQS delivers it again).
      def key_of(source, sqs_msg, body)
        key = case source
              when nil then return nil
              when String then attribute(sqs_msg, source)
              else source.call(sqs_msg, body)
              end
        case key
        when nil then nil
        when String
          return key unless key.empty?

          raise ArgumentError, "idempotency_key: an empty key for message #{sqs_msg.message_id}"
        else
          raise ArgumentError, "idempotency_key: the proc must return a String or nil, " \
                               "got #{Validate.show(key)} for message #{sqs_msg.message_id}"
        end
      end

      # "key:<key>" (or "key-sha256:<hex>"), the id MessageLock locks; never an SQS message id, so a
      # key never meets a message id.
      def lock_id(key)
        key = key.encode(Encoding::UTF_8) unless key.encoding == Encoding::UTF_8
        return "key:#{key}" if key.valid_encoding? && key.bytesize <= MAX_PLAIN && !key.match?(/[{}]/)

        "key-sha256:#{Digest::SHA256.hexdigest(key.b)}"
      rescue EncodingError
        "key-sha256:#{Digest::SHA256.hexdigest(key.b)}"
      end

      # The String value of message attribute `name` (Shoryuken's messages carry the SDK's
      # MessageAttributeValue structs; plain Hashes are read too), or nil when the message has none.
      def attribute(sqs_msg, name)
        attributes = sqs_msg.respond_to?(:message_attributes) ? sqs_msg.message_attributes : nil
        return nil unless attributes.is_a?(Hash)

        value = attributes[name]
        if value.respond_to?(:string_value) then value.string_value
        elsif value.is_a?(Hash) then value[:string_value] || value["string_value"] || value["StringValue"]
        end
      end
    end
  end
end
