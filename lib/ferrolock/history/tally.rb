# frozen_string_literal: true

module Ferrolock
  module History
    # What this process counted since its last flush: { [minute start, field] => count }. At most
    # MAX_NAMES distinct names per flush; events of the others are counted under Buckets::ROLLUP per
    # primitive, so thousands of names (a uniqueness digest per job, a limits_concurrency key per
    # account) never grow memory without bound.
    class Tally
      MAX_NAMES = 1000

      # The payload key naming what an event is counted under, by primitive: uniqueness per job
      # class and the Shoryuken lock per queue (their own names are per job or message); every
      # other primitive by its lock's :name.
      NAME_KEYS = { unique: :job_class, shoryuken_lock: :queue }.freeze

      def initialize
        @lock = Mutex.new
        @counts = Hash.new(0)
        @names = {}
      end

      # Counts one event at time (whole seconds since the epoch).
      def add(event, payload, time)
        primitive = payload[:primitive] || :other
        name = name_of(primitive, payload)
        minute = Buckets.start_of(time, Buckets::MINUTE)
        waited = payload[:waited]
        @lock.synchronize do
          name = bounded(primitive, name)
          @counts[[minute, Buckets.field(primitive, event, name)]] += 1
          @counts[[minute, Buckets.field(primitive, Buckets.wait_counter(waited), name)]] += 1 if waited.is_a?(Numeric)
        end
      end

      # Everything counted so far, and a fresh start.
      def take
        @lock.synchronize do
          counts = @counts
          @counts = Hash.new(0)
          @names = {}
          counts
        end
      end

      def empty?
        @counts.empty?
      end

      private

      def name_of(primitive, payload)
        name = payload[NAME_KEYS.fetch(primitive, :name)] || payload[:name] || payload[:job_class]
        name.nil? ? Buckets::ROLLUP : name.to_s
      end

      def bounded(primitive, name)
        key = [primitive, name]
        return name if @names.key?(key)
        return Buckets::ROLLUP if @names.size >= MAX_NAMES

        @names[key] = true
        name
      end
    end
  end
end
