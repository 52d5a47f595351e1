# frozen_string_literal: true

module Ferrolock
  module ActiveJob
    module BeforePerform
      # limits_concurrency slots and concurrency_rule places a job took by its job_id: their Slots keys
      # travel in its payload (HOLDS); a job that fails before it performs gives each back, and a
      # payload of it parked there is dropped with it (nothing is promoted twice; the next job is).
      module SlotHolds
        # The payload field: the Slots keys this job took a slot in before it ran.
        HOLDS = "ferrolock_holds"

        module_function

        def held(job_data)
          keys = job_data[HOLDS]
          keys.is_a?(Array) && !keys.empty? && keys.all?(String) ? keys : nil
        end

        def failed(job_data, keys, error, why)
          job = [job_data["job_class"].to_s, job_data["job_id"], Promotion.read(job_data) || 0]
          slots = Slots.for(Ferrolock.client)
          keys.each { |key| give_back(slots, key, job, why, error) }
        end

        # job: [class name, job_id, the copy's promotion (0: none)]. A copy of another promotion
        # than the one that started gives nothing back: the slot is the running copy's.
        def give_back(slots, key, job, why, error)
          job_class, job_id, promotion = job
          held = slots.give_back(key, job_id, promotion: promotion) == true
          what = "it held no live slot on #{key} (its lease ran out, or another copy of it runs in it)"
          what = "its slot on #{key} is given back" if held
          Ferrolock.log(:warn, "ferrolock: #{job_class} #{job_id} failed before it performed (#{why}); #{what}, " \
                               "and a payload of it parked there is dropped: it is not promoted again")
          Ferrolock.instrument(:failed_before_perform, primitive: primitive(key), name: key, job_class: job_class,
                                                       job_id: job_id, gave_back: held, error: error&.class&.name,
                                                       reason: why)
        rescue Ferrolock::Error => e
          Ferrolock.log(:warn, "ferrolock: #{job_class} #{job_id} failed before it performed (#{why}); its slot " \
                               "on #{key} could not be given back (#{e.class}: #{e.message}): it frees when its " \
                               "lease runs out")
        end

        # concurrency_rule's places are named "rule:<stage>:<key>" (ConcurrencyRule#name).
        def primitive(key)
          key.start_with?("rule:") ? :concurrency_rule : :limits_concurrency
        end
      end
    end
  end
end
