# frozen_string_literal: true

require "redis"

module FerrolockTest
  # An at-least-once queue kept in the test Redis, shared by processes, that behaves like an
  # SQS standard queue for the middleware: a message may have several copies (duplicate
  # deliveries); a received copy that is not deleted comes back after the visibility timeout;
  # a deleted copy is gone. Everything the test counts (copies deleted, work done) is in Redis.
  class FakeSqs
    Delivery = Struct.new(:message_id, :copy) do
      def to_s = "#{message_id}|#{copy}"
      def self.parse(text) = new(*text.split("|", 2))
    end

    # Moves copies whose visibility timeout passed back to the ready list, then takes one.
    RECEIVE = <<~LUA
      local now = tonumber(ARGV[1])
      local due = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 50)
      for _, member in ipairs(due) do
        redis.call('ZREM', KEYS[2], member)
        redis.call('LPUSH', KEYS[1], member)
      end
      return redis.call('RPOP', KEYS[1])
    LUA

    attr_reader :redis, :prefix

    def initialize(url:, prefix: "fakesqs", visibility_timeout: 0.2)
      @redis = Redis.new(url: url, timeout: 5)
      @prefix = prefix
      @visibility_timeout = visibility_timeout
    end

    # Enqueues deliveries (in this order: ready list pops from the right, so reversed).
    def send_copies(deliveries)
      redis.set(key("total"), deliveries.size)
      deliveries.each_slice(500) { |slice| redis.lpush(key("ready"), slice.map(&:to_s)) }
    end

    # The next visible copy, or nil.
    def receive
      text = redis.eval(RECEIVE, keys: [key("ready"), key("delayed")], argv: [Time.now.to_f])
      text && Delivery.parse(text)
    end

    # Acknowledges a copy. Deleting the same copy twice is counted (it must never happen).
    def delete(delivery)
      redis.incr(key("double_deletes")) unless redis.sadd?(key("deleted"), delivery.to_s)
    end

    # A received copy that was not deleted: visible again after the visibility timeout.
    def return_later(delivery)
      redis.zadd(key("delayed"), Time.now.to_f + @visibility_timeout, delivery.to_s)
    end

    def all_deleted?
      redis.scard(key("deleted")) >= redis.get(key("total")).to_i
    end

    def deleted_count = redis.scard(key("deleted"))
    def double_deletes = redis.get(key("double_deletes")).to_i

    # A FakeSqsMessage for a delivery whose delete acknowledges the copy here.
    def message(delivery)
      FakeSqsMessage.new(message_id: delivery.message_id, body: delivery.to_s,
                         on_delete: ->(_msg) { delete(delivery) })
    end

    def key(part) = "#{prefix}:#{part}"

    # Receives and processes copies through the chain until every copy is deleted.
    def work(chain, worker_class, queue:, deadline:)
      until all_deleted?
        raise "fake SQS: copies left at the deadline" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

        delivery = receive
        next sleep(0.005) unless delivery

        msg = message(delivery)
        begin
          ShoryukenChain.process(chain, worker_class.new, queue, msg)
        rescue StandardError
          nil # Shoryuken logs it; the copy stays on the queue
        end
        return_later(delivery) unless msg.deleted?
      end
    end
  end
end
