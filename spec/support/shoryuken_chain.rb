# frozen_string_literal: true

# A stand-in for the parts of Shoryuken the middleware meets, used ONLY by bin/bench and bin/demo
# when the vendored, real Shoryuken 6.2.1 cannot be loaded (the specs use the real one: see
# spec/support/real_shoryuken.rb). It follows Shoryuken's documented API: the server middleware chain
# (add, prepend, insert_before, insert_after, remove, exists?, retrieve, clear, invoke), which
# builds a NEW instance of every middleware for every message with the arguments given to
# `add` (kept as a positional Hash, exactly as Shoryuken's `*args` keeps them); AutoDelete,
# which deletes the message after `yield` returns when the worker asks for it; and
# Shoryuken::Worker's `shoryuken_options` (string keys).
module Shoryuken
  module Middleware
    # Shoryuken::Middleware::Chain, written from its documented behaviour: an ordered list of
    # (class, constructor arguments); `invoke` instantiates every class afresh for each
    # message and nests the calls, the block given to `invoke` running innermost.
    class Chain
      Link = Struct.new(:klass, :args) do
        def build
          klass.new(*args)
        end
      end

      attr_reader :entries

      def initialize
        @entries = []
        yield self if block_given?
      end

      def dup
        copy = self.class.new
        copy.entries.concat(entries)
        copy
      end

      # Appends, unless the class is already in the chain.
      def add(klass, *args)
        entries.push(Link.new(klass, args)) unless exists?(klass)
      end

      def prepend(klass, *args)
        entries.unshift(Link.new(klass, args)) unless exists?(klass)
      end

      # Puts `klass` right before `anchor` (at the front when the anchor is absent); a class
      # already in the chain is moved, keeping its arguments.
      def insert_before(anchor, klass, *args)
        link = take_out(klass) || Link.new(klass, args)
        position = index_of(anchor) || 0
        entries.insert(position, link)
      end

      # Puts `klass` right after `anchor` (at the end when the anchor is absent).
      def insert_after(anchor, klass, *args)
        link = take_out(klass) || Link.new(klass, args)
        position = index_of(anchor)
        position.nil? ? entries.push(link) : entries.insert(position + 1, link)
      end

      def remove(klass)
        entries.reject! { |link| link.klass == klass }
      end

      def exists?(klass)
        !index_of(klass).nil?
      end

      # New instances, every time: one set per message.
      def retrieve
        entries.map(&:build)
      end

      def clear
        entries.clear
      end

      def invoke(*args, &work)
        call_from(retrieve, 0, args, work)
      end

      private

      def call_from(middlewares, position, args, work)
        return work.call if position == middlewares.size

        middlewares[position].call(*args) { call_from(middlewares, position + 1, args, work) }
      end

      def index_of(klass)
        entries.index { |link| link.klass == klass }
      end

      def take_out(klass)
        position = index_of(klass)
        position && entries.delete_at(position)
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
        chain.insert_before Shoryuken::Middleware::Server::AutoDelete, Ferrolock::Shoryuken::LockMiddleware, *lock_args
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
