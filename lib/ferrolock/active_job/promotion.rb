# frozen_string_literal: true

require "json"

module Ferrolock
  module ActiveJob
    # Enqueues blocked jobs that were just given a slot. Each keeps its payload in Redis until it
    # starts, so one whose enqueue fails here (the adapter raised, this process died) goes back
    # to the head of its line when its lease runs out: a promotion is never a lost job. One that
    # cannot be built any more (its class is gone) could run nowhere: it is dropped, with an
    # error logged, rather than hold its key's first place for ever.
    #
    # Each promotion of a job is numbered, and the enqueued copy carries its number in its payload
    # (FIELD): a job promoted again because its copy had not started when its lease ran out has two
    # copies queued, and at perform only the one that started first runs (admit.lua: :duplicate).
    module Promotion
      # The payload field: the promotion this copy of the job is (absent: none).
      FIELD = "ferrolock_promotion"

      module_function

      # The promotion the job carries (0: none).
      def number(job)
        job.instance_variable_get(:@ferrolock_promotion) || 0
      end

      # The job's payload with its promotion.
      def carry(job, data)
        number = job.instance_variable_get(:@ferrolock_promotion)
        number ? data.merge(FIELD => number) : data
      end

      # The promotion a payload carries (nil: none; ferrolock wrote it: anything else is ignored).
      def read(job_data)
        number = job_data[FIELD]
        number if number.is_a?(Integer) && number.positive?
      end

      # promoted: [[job_id, payload JSON, promotion], ...] from a Redis script for `key` of `slots`.
      def enqueue(promoted, slots, key)
        return nil if promoted.empty?
        return elsewhere(promoted) unless Object.const_defined?(:ActiveJob) && ::ActiveJob.const_defined?(:Base)

        promoted.each do |job_id, payload, number|
          job = build(job_id, payload, key, number) or next slots.give_back(key, job_id)
          begin
            job.enqueue
            Ferrolock.instrument(:promoted, primitive: :limits_concurrency, name: key, job_class: job.class.name,
                                            job_id: job_id)
          rescue StandardError => e
            Ferrolock.log(:warn, "ferrolock: limits_concurrency: could not enqueue promoted job #{job_id} " \
                                 "(#{e.class}: #{e.message}); it is promoted again when its lease runs out")
          end
        end
        nil
      end

      # The job, due now and holding its slot in `key` (its concurrency check at enqueue is
      # skipped; its payload says it holds the slot: BeforePerform, and which promotion it is); nil
      # when its payload names no job class any more.
      def build(job_id, payload, key, number)
        data = JSON.parse(payload)
        job = Object.const_get(data.fetch("job_class")).new
        job.deserialize(data)
        job.scheduled_at = nil
        job.instance_variable_set(:@ferrolock_promoted, true)
        job.instance_variable_set(:@ferrolock_promotion, number)
        job.instance_variable_set(:@ferrolock_holds, BeforePerform.keys_in(data) || [])
        BeforePerform.hold(job, key)
        job
      rescue NameError, JSON::ParserError, KeyError => e
        Ferrolock.log(:error, "ferrolock: limits_concurrency: dropped promoted job #{job_id}: it cannot be " \
                              "built (#{e.class}: #{e.message})")
        nil
      end

      # A process without ActiveJob (an operator's console) cannot enqueue them: they keep their
      # slots and payloads, and go back to the head of their line when the lease runs out.
      def elsewhere(promoted)
        Ferrolock.log(:warn, "ferrolock: limits_concurrency: #{promoted.size} promoted job(s) cannot be enqueued " \
                             "without ActiveJob here; they are promoted again when their lease runs out")
        nil
      end
    end
  end
end
