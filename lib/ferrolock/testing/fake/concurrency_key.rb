# frozen_string_literal: true

module Ferrolock
  module Testing
    module Fake
      # One limits_concurrency key in memory, step for step as ext/ferrolock-core/lua/job_concurrency/
      # admit.lua and release.lua keep it in Redis, in whole ms of Testing.now: slots (job_id => lease
      # expiry), the line of blocked job_ids (oldest first), the payloads of blocked jobs and of promoted
      # ones not started yet (job_id => [lease ms, payload, last promotion]), which copy of a job
      # promoted more than once started (job_id => [its promotion, last promotion]), the limit the last
      # blocked job stored, the last fencing token. A performing job's slot is renewed, so here it never
      # runs out.
      class ConcurrencyKey
        # The operators' Admin::LimitOverride::Override (nil: none): its limit replaces the code's;
        # paused, no slot is taken and every job is blocked (never discarded).
        attr_accessor :override

        def initialize
          @slots = {}
          @blocked = []
          @jobs = {}
          @started = {}
          @renewing = {}
          @limit = nil
          @fence = 0
        end

        # admit.lua: [outcome, fencing token, blocked count, promoted [[job_id, payload, promotion], ...]];
        # copy: the promotion this copy of the job carries (0: none).
        def admit(job_id, payload, at_perform, policy, now, copy = 0) # rubocop:disable Metrics/ParameterLists -- admit.lua's
          limit = in_force(policy[0])
          entry = @jobs[job_id]
          free_expired(now)
          live, promoted = promote(limit, now, at_perform ? job_id : nil)
          claim(at_perform, job_id, entry, copy)
          outcome, fence =
            if duplicate?(at_perform, job_id, entry, copy)
              [:duplicate, 0]
            elsif live?(job_id, now) || (live < limit && !@jobs.key?(job_id))
              hold(job_id, policy[1], at_perform ? [entry, copy] : nil, now)
            else
              over_limit(job_id, payload, policy, copy)
            end
          [outcome, fence, @blocked.size, promoted]
        end

        # release.lua: [held (1, 0 when its lease had run out, -1 without a job_id), promoted]. A job
        # giving its slot back is done with its payload too; a copy of another promotion (copy) than
        # the one that started gives nothing back (0).
        def release(job_id, limit, now, copy = 0)
          held = job_id ? give_up(job_id, now, copy) : -1
          free_expired(now)
          promoted = promote(in_force(limit || @limit || 1), now).last
          @limit = nil if @blocked.empty? && @jobs.empty?
          [held, promoted]
        end

        # The performing job's slot is renewed (never runs out here) from start to stop.
        def renew(job_id)
          @renewing[job_id] = true
        end

        def stop_renewing(job_id)
          @renewing.delete(job_id)
        end

        # When a timer's visit would free a slot for the blocked jobs: the earliest lease not renewed,
        # 0 when no slot is left; nil when nobody is parked or every slot is renewed.
        def due_at
          # Parked (admit.lua's index): blocked, or promoted and not started (a payload and a slot).
          return nil if @blocked.empty? && @jobs.none? { |job_id, _| @slots.key?(job_id) }

          @slots.empty? ? 0 : @slots.except(*@renewing.keys).values.min
        end

        def slot?(job_id)
          @slots.key?(job_id)
        end

        private

        # :discarded or :full for a job over the limit under `policy`, nil when it is blocked: a paused
        # key blocks every job.
        def refusal(policy)
          _, _, on_conflict, max_blocked = policy
          return nil if @override&.paused
          return :discarded if on_conflict == "discard"

          :full if max_blocked.positive? && @blocked.size >= max_blocked
        end

        # The limit in force for the code's `configured` one (0 while paused).
        def in_force(configured)
          return configured unless @override

          @override.paused ? 0 : (@override.limit || configured)
        end

        # At perform, a copy of another promotion than the one that started (entry: the job's as the
        # call began).
        def duplicate?(at_perform, job_id, entry, copy)
          started = at_perform && !entry && @started[job_id]
          started ? started[0] != copy : false
        end

        # At perform, no copy had started when the job's entry went (give_up left [nil, last]): this copy
        # claims it.
        def claim(at_perform, job_id, entry, copy)
          started = at_perform && !entry && @started[job_id]
          @started[job_id] = [copy, [copy, started[1]].max] if started && started[0].nil?
        end

        # Which copy started, kept when another copy of another promotion may come.
        def remember_start(job_id, entry, copy)
          number = entry&.at(2)
          @started[job_id] = [copy, [number, copy].max] if number && (number > 1 || number != copy)
        end

        def live?(job_id, now)
          at = @slots[job_id]
          !at.nil? && (at > now || @renewing.key?(job_id))
        end

        # copy: the promotion of the copy giving up (0: none); another promotion's than the one that
        # started gives nothing up.
        def give_up(job_id, now, copy = 0)
          return 0 if another_started?(job_id, copy)

          held = live?(job_id, now) ? 1 : 0
          # A job promoted more than once, no copy started: the first copy to perform claims it.
          number = @jobs.dig(job_id, 2)
          @started[job_id] ||= [nil, number] if number && number > 1
          [@slots, @jobs, @renewing].each { |table| table.delete(job_id) }
          held
        end

        # A copy of another promotion (copy, 0: none) than the one that started.
        def another_started?(job_id, copy)
          started = copy.positive? && @started.dig(job_id, 0)
          started ? started != copy : false
        end

        # Slots whose lease ran out are free; a promoted job that never started (its enqueue was
        # lost) goes back to the head of the line.
        def free_expired(now)
          ran_out = @slots.select { |id, at| at <= now && !@renewing.key?(id) }
          expired = ran_out.sort_by { |id, at| [at, id] }.map(&:first)
          expired.each { |id| @slots.delete(id) }
          @blocked.unshift(*expired.select { |id| @jobs.key?(id) })
        end

        # The oldest blocked jobs take the free slots, each with its own lease; `starting`, this very
        # job delivered twice, takes its slot itself. [slots held, promoted].
        def promote(limit, now, starting = nil)
          live = @slots.size
          promoted = []
          while live < limit && (id = @blocked.shift)
            lease, payload, number = @jobs[id]
            next unless lease

            @slots[id] = now + lease
            live += 1
            next @jobs.delete(id) if id == starting

            @jobs[id] = [lease, payload, number + 1]
            promoted << [id, payload, number + 1]
          end
          [live, promoted]
        end

        # At perform (starting: [its entry as the call began, the copy's promotion]) the job starts (its
        # payload goes, a fencing token is issued; the copy that started is remembered when another
        # copy may meet it); at enqueue (a resumption) its lease covers its wait in the queue.
        def hold(job_id, lease, starting, now)
          unless starting
            @slots[job_id] = [@slots[job_id] || 0, now + lease].max
            return [:held, 0]
          end

          remember_start(job_id, *starting)
          @jobs.delete(job_id)
          @limit = nil if @jobs.empty? && @blocked.empty?
          @slots[job_id] = now + lease
          # Never back, as the Redis counter's max(last + 1, time in µs).
          [:held, @fence = [@fence + 1, now * 1000].max]
        end

        def over_limit(job_id, payload, policy, copy)
          limit, lease, = policy
          return [:waiting, 0] if @jobs.key?(job_id)

          refused = refusal(policy)
          return [refused, 0] if refused

          @blocked << job_id
          @jobs[job_id] = [lease, payload, [copy, @started.dig(job_id, 1) || 0].max]
          @limit = limit
          [:blocked, 0]
        end
      end
    end
  end
end
