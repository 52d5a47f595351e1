# frozen_string_literal: true

module Ferrolock
  module History
    # What this process counted since its last flush: { [minute start, field] => count }. At most
    # MAX_NAMES distinct names per flush; events of the others are counted under Buckets::ROLLUP per
    # primitive, so thousands of names (a uniqueness digest per job, a limits_concurrency key per
    # account) never grow memory without bound. With the Counters (at most Counters::MAX), a flush
    # holds at most MAX_NAMES + Counters::MAX names (2,000, the README's bound).
    class Tally
      MAX_NAMES = 1000
      MINUTE = Buckets::MINUTE.seconds

      # The payload key naming what an event is counted under, by primitive: uniqueness per job
      # class and the Shoryuken lock per queue (their own names are per job or message); every
      # other primitive by its lock's :name.
      NAME_KEYS = { unique: :job_class, shoryuken_lock: :queue }.freeze

      def initialize
        @lock = Mutex.new
        @counts = {}
        @names = {}
      end

      # Counts one event at time (whole seconds since the epoch), and its :waited and :held seconds
      # in their histograms. Nested hashes of Symbols and the name, and the steps' counters made once
      # (Buckets::WAIT_COUNTERS): no String is built per event (take builds the fields).
      def add(event, payload, time)
        primitive = payload[:primitive] || :other
        name = name_of(primitive, payload)
        waited = payload[:waited]
        wait = Buckets::WAIT_COUNTERS[Buckets.wait_step(waited)] if waited.is_a?(Numeric)
        held = payload[:held]
        hold = Buckets::HOLD_COUNTERS[Buckets.wait_step(held)] if held.is_a?(Numeric)
        minute = time - (time % MINUTE)
        @lock.synchronize do
          counters = counters_of(minute, primitive, name)
          counters[event] += 1
          counters[wait] += 1 if wait
          counters[hold] += 1 if hold
        end
      end

      # Everything counted so far as { [minute start, field] => count }, and a fresh start.
      def take
        counts = @lock.synchronize do
          taken = @counts
          @counts = {}
          @names = {}
          taken
        end
        fields(counts)
      end

      def empty?
        @counts.empty?
      end

      private

      def name_of(primitive, payload)
        name = payload[NAME_KEYS[primitive] || :name] || payload[:name] || payload[:job_class]
        case name
        when String then name
        when nil then Buckets::ROLLUP
        else name.to_s
        end
      end

      # { event, or a wait or hold step's counter => count } of name in minute.
      def counters_of(minute, primitive, name)
        names = ((@counts[minute] ||= {})[primitive] ||= {})
        names[name] || (names[bounded(primitive, name)] ||= Hash.new(0))
      end

      def fields(counts)
        counts.each_with_object({}) do |(minute, primitives), out|
          primitives.each do |primitive, names|
            names.each do |name, counters|
              counters.each do |counter, count|
                out[[minute, Buckets.field(primitive, counter, name)]] = count
              end
            end
          end
        end
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
