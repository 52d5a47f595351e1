# frozen_string_literal: true

require "json"
require_relative "reading"
require_relative "lease_info"
require_relative "limit_override"

module Ferrolock
  class Admin
    # One limits_concurrency key as Redis has it: the jobs holding a slot (job_id, lease left in
    # seconds), how many wait (blocked), the first few of them (blocked_jobs, oldest first: as many
    # as the core's state names, each with its force release in the Web tab) and the oldest (its
    # job_id, seconds since it was enqueued). `limit` is the one stored by the last job blocked
    # (nil while nobody was); `override` the operators' LimitOverride::Override in force (nil: none).
    ConcurrencyInfo = Struct.new(:name, :key, :limit, :holders, :blocked, :oldest_job_id, :oldest_age,
                                 :blocked_jobs, :override, keyword_init: true) do
      def kind
        :limits_concurrency
      end

      def held?
        !holders.empty?
      end

      def to_h
        super.merge(kind: kind, holders: holders.map(&:to_h), override: override&.to_h)
      end

      # Live slots only (one whose lease ran out is free, as the scripts count it); nil when
      # nothing is held nor blocked under the name.
      def self.read(client, name)
        state = Reading.state(client, :limits_concurrency, name) or return nil
        new(name: name, key: state[:key], limit: state[:limit],
            holders: state[:holders].map { |slot| LeaseInfo.from(slot, holder: false) }, blocked: state[:blocked],
            oldest_job_id: state[:oldest_job_id], blocked_jobs: state[:blocked_jobs],
            oldest_age: state[:oldest_job_id] && age(client, state[:oldest_payload]),
            override: LimitOverride.read(client, name))
      end

      # Seconds since the job was enqueued (its ActiveJob payload's enqueued_at, by Redis' clock);
      # nil when unknown.
      def self.age(client, payload)
        enqueued_at = payload && JSON.parse(payload)["enqueued_at"] or return nil
        seconds, micros = client.call("TIME")
        Integer(seconds) + (Integer(micros) / 1000 / 1000.0) - Time.iso8601(enqueued_at).to_f
      rescue JSON::ParserError, ArgumentError, TypeError
        nil
      end
    end
  end
end
