# frozen_string_literal: true

# A stand-in for the parts of Shoryuken the middleware meets (the shoryuken gem is not
# installable here). It follows Shoryuken's documented API: the server middleware chain
# (add, prepend, insert_before, insert_after, remove, exists?, retrieve, clear, invoke), which
# builds a NEW instance of every middleware for every message with the arguments given to
# `add` (kept as a positional Hash, exactly as Shoryuken's `*args` keeps them); AutoDelete,
# which deletes the message after `yield` returns when the worker asks for it; and
# Shoryuken::Worker's `shoryuken_options` (string keys).
module Shoryuken
  module Middleware
    # Shoryuken::Middleware::Chain
    class Chain
      # One middleware class and its constructor arguments.
      class Entry
        attr_reader :klass

        def initialize(klass, *args)
          @klass = klass
          @args = args
        end

        def make_new
          @klass.new(*@args)
        end
      end

      attr_reader :entries

      def initialize
        @entries = []
        yield self if block_given?
      end

      def dup
        self.class.new.tap { |chain| chain.entries.replace(entries) }
      end

      def remove(klass)
        entries.delete_if { |entry| entry.klass == klass }
      end

      def add(klass, *args)
        entries << Entry.new(klass, *args) unless exists?(klass)
      end

      def prepend(klass, *args)
        entries.insert(0, Entry.new(klass, *args)) unless exists?(klass)
      end

      def insert_before(oldklass, newklass, *args)
        i = entries.index { |entry| entry.klass == newklass }
        new_entry = i.nil? ? Entry.new(newklass, *args) : entries.delete_at(i)
        i = entries.find_index { |entry| entry.klass == oldklass } || 0
        entries.insert(i, new_entry)
      end

      def insert_after(oldklass, newklass, *args)
        i = entries.index { |entry| entry.klass == newklass }
        new_entry = i.nil? ? Entry.new(newklass, *args) : entries.delete_at(i)
        i = entries.find_index { |entry| entry.klass == oldklass } || (entries.count - 1)
        entries.insert(i + 1, new_entry)
      end

      def exists?(klass)
        entries.any? { |entry| entry.klass == klass }
      end

      # New instances, every time: one set per message.
      def retrieve
        entries.map(&:make_new)
      end

      def clear
        entries.clear
      end

      def invoke(*args, &final_action)
        chain = retrieve.dup
        traverse_chain = lambda do
          if chain.empty?
            final_action.call
          else
            chain.shift.call(*args, &traverse_chain)
          end
        end
        traverse_chain.call
      end
    end

    module Server
      # Deletes the message(s) once the rest of the chain returned without raising, when the
      # worker has auto_delete (Shoryuken batches the delete; one delete per message here).
      class AutoDelete
        def call(worker, _queue, sqs_msg, _body)
          yield
          return unless worker.class.respond_to?(:auto_delete?) && worker.class.auto_delete?

          [sqs_msg].flatten.each(&:delete)
        end
      end
    end
  end

  # Shoryuken::Worker's options API: string keys, merged over the defaults.
  module Worker
    def self.included(base)
      base.extend(ClassMethods)
    end

    # Class-level shoryuken_options.
    module ClassMethods
      def shoryuken_options(opts = {})
        @shoryuken_options = get_shoryuken_options.merge(opts.transform_keys(&:to_s))
      end

      def get_shoryuken_options # rubocop:disable Naming/AccessorMethodName -- Shoryuken's name
        @shoryuken_options || { "queue" => "default", "delete" => false, "auto_delete" => false, "batch" => false }
      end

      def auto_delete?
        !!(get_shoryuken_options["delete"] || get_shoryuken_options["auto_delete"])
      end
    end
  end
end

module FerrolockTest
  # What a Shoryuken server chain looks like with the lock before AutoDelete.
  module ShoryukenChain
    module_function

    def build(*lock_args)
      Shoryuken::Middleware::Chain.new do |chain|
        chain.add Shoryuken::Middleware::Server::AutoDelete
        chain.insert_before Shoryuken::Middleware::Server::AutoDelete, Ferrolock::Shoryuken::Lock, *lock_args
      end
    end

    # What Shoryuken's processor does with one received message.
    def process(chain, worker, queue, sqs_msg, body = nil)
      body ||= sqs_msg.body if sqs_msg.respond_to?(:body)
      chain.invoke(worker, queue, sqs_msg, body) { worker.perform(sqs_msg, body) }
    end
  end

  # An SQS message stand-in: message_id, body, delete and change_visibility, recording calls.
  # on_delete is called on each delete (e.g. to record it in Redis across processes).
  class FakeSqsMessage
    attr_reader :message_id, :body, :receipt_handle, :calls

    def initialize(message_id:, body: "{}", receipt_handle: "rh-#{rand(1 << 48)}", on_delete: nil)
      @message_id = message_id
      @body = body
      @receipt_handle = receipt_handle
      @on_delete = on_delete
      @calls = []
      @lock = Mutex.new
    end

    def delete
      @lock.synchronize { @calls << [:delete] }
      @on_delete&.call(self)
      true
    end

    def change_visibility(visibility_timeout:)
      @lock.synchronize { @calls << [:change_visibility, visibility_timeout] }
      true
    end

    def deletes
      @lock.synchronize { @calls.count { |call| call.first == :delete } }
    end

    def deleted?
      deletes.positive?
    end
  end
end
