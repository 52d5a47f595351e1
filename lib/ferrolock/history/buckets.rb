# frozen_string_literal: true

module Ferrolock
  module History
    # Where and for how long history is kept: one Redis hash per minute (kept 8 hours) and one per
    # hour (kept 72 hours, Sidekiq's own retention), every one under the {history} hash tag (one
    # slot, so one flush is one script on a cluster too) and expiring at a fixed time.
    # Fields are "<primitive>|<counter>|<name>": the counter is the event's kind, "w<step>" for one
    # step of the wait-time histogram or "h<step>" for one of the hold-time histogram (:waited and
    # :held of the payloads). The name comes last, so any name parses.
    module Buckets
      Step = Struct.new(:letter, :seconds, :keep)
      MINUTE = Step.new("m", 60, 8 * 3600)
      HOUR = Step.new("h", 3600, 72 * 3600)
      STEPS = [MINUTE, HOUR].freeze

      # Most fields of one hash; a name new to a full hash is counted under ROLLUP ("(other)"), so a
      # flood of names costs at most this per bucket (about 60 bytes a field: 1.2 MB a minute at
      # worst, 480 minutes).
      MAX_FIELDS = { "m" => 20_000, "h" => 50_000 }.freeze
      ROLLUP = "(other)"
      SEPARATOR = "|"

      # Wait- and hold-time histograms: step 0 is under 1 ms, step n (1..LAST_WAIT_STEP) under 2**n ms.
      LAST_WAIT_STEP = 24
      WAIT_PREFIX = "w"
      HOLD_PREFIX = "h"
      # Each step's counter (:w7, :h7), made once: Tally counts under them with nothing built per event,
      # and a Symbol hashes cheaper than a String.
      WAIT_COUNTERS = Array.new(LAST_WAIT_STEP + 1) { |step| :"#{WAIT_PREFIX}#{step}" }.freeze
      HOLD_COUNTERS = Array.new(LAST_WAIT_STEP + 1) { |step| :"#{HOLD_PREFIX}#{step}" }.freeze
      STEP_COUNTER = /\A[#{WAIT_PREFIX}#{HOLD_PREFIX}]\d+\z/

      module_function

      # The bucket (its start, whole seconds since the epoch) of time in step.
      def start_of(time, step)
        time - (time % step.seconds)
      end

      # The hash holding the bucket that starts at start.
      def key(client, step, start)
        client.key("history", "#{step.letter}:#{start}")
      end

      # When that hash goes: its bucket's end plus how long step keeps it.
      def expires_at(step, start)
        start + step.seconds + step.keep
      end

      def field(primitive, counter, name)
        "#{primitive}#{SEPARATOR}#{counter}#{SEPARATOR}#{name}"
      end

      # [primitive, counter, name] of a field.
      def parse(field)
        field.split(SEPARATOR, 3)
      end

      # The histogram step of a wait (or hold) of seconds.
      def wait_step(seconds)
        ms = (seconds * 1000).to_i
        step = ms < 1 ? 0 : ms.bit_length
        step > LAST_WAIT_STEP ? LAST_WAIT_STEP : step
      end

      # The counter of a wait of seconds: its step's (:w7).
      def wait_counter(seconds)
        WAIT_COUNTERS[wait_step(seconds)]
      end

      # The counter of a hold of seconds: its step's (:h7).
      def hold_counter(seconds)
        HOLD_COUNTERS[wait_step(seconds)]
      end

      # The step of a wait or hold counter ("w7" or "h7" => 7), or nil for an event's counter.
      def step_of(counter)
        Integer(counter[1..], 10) if counter.match?(STEP_COUNTER)
      end

      # True for a hold counter ("h7"), false for a wait's; step_of tells either from an event's.
      def hold?(counter)
        counter.start_with?(HOLD_PREFIX)
      end

      # The seconds a wait in step is below (the last step: at least its lower bound).
      def wait_bound(step)
        (2**step) / 1000.0
      end
    end
  end
end
