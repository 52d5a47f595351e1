# frozen_string_literal: true

require "redis"
require_relative "fake_sqs_client"

module FerrolockTest
  # A fake SQS client (for the REAL Shoryuken, like FakeSqsClient) whose queue lives in the test
  # Redis, so several processes share it. It behaves like an SQS standard queue: a message may
  # have several copies; each receive hides the copy for the visibility timeout under a fresh
  # receipt handle; a copy not deleted by then is received again. Deleting with an outdated
  # receipt handle does nothing (counted as stale, as SQS may ignore it); deleting a copy twice
  # with the same receipt handle is counted as a double delete (it must never happen).
  class SharedFakeSqsClient < FakeSqsClient
    # KEYS: ready (list of copies), hidden (zset copy -> visible again at), receipts (hash copy ->
    # current receipt), seq. ARGV: now, visibility timeout. Returns a receipt handle or nil.
    RECEIVE = <<~LUA
      local now = tonumber(ARGV[1])
      for _, copy in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 50)) do
        redis.call('ZREM', KEYS[2], copy)
        redis.call('LPUSH', KEYS[1], copy)
      end
      local copy = redis.call('RPOP', KEYS[1])
      if not copy then return false end
      local receipt = copy .. '#' .. redis.call('INCR', KEYS[4])
      redis.call('HSET', KEYS[3], copy, receipt)
      redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), copy)
      return receipt
    LUA

    # KEYS: hidden, receipts, deleted (hash copy -> the receipt that deleted it), double, stale.
    # ARGV: copy, receipt.
    DELETE = <<~LUA
      local by = redis.call('HGET', KEYS[3], ARGV[1])
      if by == ARGV[2] then return redis.call('INCR', KEYS[4]) end
      if by or redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then return redis.call('INCR', KEYS[5]) end
      redis.call('ZREM', KEYS[1], ARGV[1])
      redis.call('HDEL', KEYS[2], ARGV[1])
      redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
      return 0
    LUA

    def initialize(url:, hide_for: 0.5, prefix: "fakesqs")
      super()
      @redis = Redis.new(url: url, timeout: 10)
      @hide_for = hide_for
      @prefix = prefix
    end

    # Sends copies, each "<message_id>|<copy>", received in this order.
    def send_copies(copies)
      @redis.set(key("total"), copies.size)
      copies.each_slice(500) { |slice| @redis.lpush(key("ready"), slice) }
    end

    def receive_message(params)
      record(:receive_message, params)
      messages = Array.new(params.fetch(:max_number_of_messages, 1)) { receive_one }.compact
      Reply.new(messages: messages)
    end

    def delete_message(params)
      record(:delete_message, params)
      delete(params.fetch(:receipt_handle))
      Reply.new
    end

    def delete_message_batch(params)
      record(:delete_message_batch, params)
      params.fetch(:entries).each { |entry| delete(entry.fetch(:receipt_handle)) }
      Reply.new(failed: [], successful: params[:entries])
    end

    def all_deleted? = @redis.hlen(key("deleted")) >= @redis.get(key("total")).to_i
    def deleted_count = @redis.hlen(key("deleted"))
    def double_deletes = @redis.get(key("double")).to_i
    def stale_deletes = @redis.get(key("stale")).to_i

    private

    def receive_one
      receipt = @redis.eval(RECEIVE, keys: %w[ready hidden receipts seq].map { |k| key(k) },
                                     argv: [Time.now.to_f, @hide_for])
      return nil unless receipt

      MessageData.new(message_id: receipt.split("|").first, receipt_handle: receipt, body: "{}", md5_of_body: nil,
                      attributes: { "ApproximateReceiveCount" => "1" }, md5_of_message_attributes: nil,
                      message_attributes: {})
    end

    def delete(receipt)
      @redis.eval(DELETE, keys: %w[hidden receipts deleted double stale].map { |k| key(k) },
                          argv: [receipt.split("#").first, receipt])
    end

    def key(part) = "#{@prefix}:#{part}"
  end
end
