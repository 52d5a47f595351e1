# frozen_string_literal: true

require "json"
require_relative "reading"

module Ferrolock
  class Admin
    # Key names of limits_concurrency (lib/ferrolock/active_job/): "concurrency:<group>/<key>".
    CONCURRENCY_PREFIX = "concurrency:"
    # How many of a key's blocked jobs a listing names (each with its force release in the Web tab).
    BLOCKED_SHOWN = 10

    # One limits_concurrency key as Redis has it: the jobs holding a slot (job_id, lease left in
    # seconds), how many wait (blocked), the first BLOCKED_SHOWN of them (blocked_jobs, oldest first)
    # and the oldest (its job_id, seconds since it was enqueued). `limit` is the one stored by the
    # last job blocked (nil while nobody was).
    ConcurrencyInfo = Struct.new(:name, :key, :limit, :holders, :blocked, :oldest_job_id, :oldest_age,
                                 :blocked_jobs, keyword_init: true) do
      def kind
        :limits_concurrency
      end

      def held?
        !holders.empty?
      end

      def to_h
        super.merge(kind: kind, holders: holders.map(&:to_h))
      end

      # Live slots only (one whose lease ran out is free, as the scripts count it); nil when nothing
      # is held nor blocked under the name.
      def self.read(client, keys, name)
        now = Reading.now_ms(client)
        entries = client.call("ZRANGEBYSCORE", keys.key(name, "slots"), "(#{now}", "+inf", "WITHSCORES")
        blocked = client.call("LLEN", keys.key(name, "blocked"))
        return nil if entries.empty? && blocked.zero?

        first = blocked.zero? ? [] : client.call("LRANGE", keys.key(name, "blocked"), 0, BLOCKED_SHOWN - 1)
        oldest = first.first
        limit = client.call("HGET", keys.key(name, "jobs"), "{limit}")
        new(name: name, key: name.delete_prefix(CONCURRENCY_PREFIX), limit: limit && Integer(limit),
            holders: holders(entries, now), blocked: blocked, oldest_job_id: oldest, blocked_jobs: first,
            oldest_age: oldest && age(client, keys.key(name, "jobs"), oldest, now))
      end

      # [job_id, expiry ms, ...] as SlotInfo (a job holds the slot: no process metadata).
      def self.holders(entries, now_ms)
        entries.each_slice(2).map do |job_id, expiry|
          SlotInfo.new(token: job_id, ttl: (Float(expiry) - now_ms) / 1000.0, holder: nil)
        end
      end

      # Seconds since the job was enqueued (its payload's enqueued_at); nil when unknown.
      def self.age(client, jobs_key, job_id, now_ms)
        entry = client.call("HGET", jobs_key, job_id) or return nil
        enqueued_at = JSON.parse(entry.sub(/\A\d+\|/, ""))["enqueued_at"] or return nil
        (now_ms / 1000.0) - Time.iso8601(enqueued_at).to_f
      rescue JSON::ParserError, ArgumentError
        nil
      end
    end
  end
end
