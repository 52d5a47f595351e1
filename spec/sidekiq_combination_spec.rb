# frozen_string_literal: true

require "sidekiq"
require "sidekiq/api"
require_relative "fixtures/combination_jobs"

# Every ferrolock client middleware (uniqueness, FairTenant) with every server middleware
# (uniqueness, DualLock, limiter), in both orders of both chains, on a real `sidekiq`: plain and
# ActiveJob jobs, duplicates, a retry, scheduled jobs, FairTenant reroutes and limiter reschedules.
# No job is lost, none runs twice where its until_executed lock promises once, and no lock outlives
# its job.
RSpec.describe "ferrolock's Sidekiq middlewares combined" do
  let(:app) { "spec/fixtures/combination_app.rb" }
  let(:redis) { FerrolockTest.redis_server.redis }

  let(:log) { StringIO.new }

  before do
    Sidekiq.configure_client { |c| c.redis = { url: FerrolockTest.redis_server.url } }
    @logger = Ferrolock.config.logger
    Ferrolock.config.logger = Logger.new(log)
    @jids = []
  end

  after do
    Ferrolock.config.logger = @logger
    FerrolockTest::SidekiqVersion.client_middleware do |chain|
      ComboChains::CLIENT.each { |middleware| chain.remove(middleware) }
    end
  end

  def client_chain(order)
    FerrolockTest::SidekiqVersion.client_middleware do |chain|
      ComboChains::CLIENT.each { |middleware| chain.remove(middleware) }
      ComboChains.client(chain, order)
    end
  end

  def done
    redis.lrange("combo:done", 0, -1)
  end

  def attempts(id)
    redis.get("combo:attempts:#{id}").to_i
  end

  # Pushes each job twice: [first push's jid, second push's] (the second, a duplicate, is refused).
  def push_twice(ids, &push)
    pushed = ids.to_h { |id| [id, [push.call(id), push.call(id)]] }
    @jids.concat(pushed.values.map(&:first))
    pushed
  end

  # perform_later's answer: the job, or false for a duplicate the uniqueness middleware skipped (an
  # aborted enqueue, as ActiveJob reports one).
  def active_job_jid(job)
    job == false ? nil : job.provider_job_id
  end

  # Two jobs hold both limiter slots; a third finds the limiter full and is rescheduled, and keeps
  # its lock meanwhile. Returns the ids pushed.
  def reschedule_behind_blockers
    %w[g1 g2].each { |id| ComboJob.perform_async("blockers", id, "gate") }
    wait_until(timeout: 30) { redis.get("combo:inside") == "2" }
    rescheduled = ComboJob.perform_async("t1", "r1", "ok")
    wait_until(timeout: 30) { Sidekiq::ScheduledSet.new.find_job(rescheduled)&.item&.key?("ferrolock_overlimit") }
    expect(ComboJob.perform_async("t1", "r1", "ok")).to be_nil
    %w[g1 g2 r1]
  end

  # Plain and ActiveJob jobs, due now and scheduled, one failing once: each pushed twice.
  def push_the_rest
    pushed = push_twice(%w[p1 p2 p3 p4 p5 p6]) { |id| ComboJob.perform_async("t2", id, "ok") }
    pushed.merge!(push_twice(%w[f1 f2]) { |id| ComboJob.perform_async("t3", id, "flaky") })
    pushed.merge!(push_twice(%w[s1 s2]) { |id| ComboJob.perform_in(1, "t4", id, "ok") })
    pushed.merge!(push_twice(%w[a1 a2 a3 a4]) { |id| active_job_jid(ComboActiveJob.perform_later("t5", id, "ok")) })
    pushed.merge!(push_twice(%w[as1]) do |id|
      active_job_jid(ComboActiveJob.set(wait: 1).perform_later("t5", id, "ok"))
    end)
    expect(pushed.values.map { |first, second| [first.class, second] }.uniq).to eq([[String, nil]])
    pushed.keys
  end

  # While the flaky job waits for its retry, its duplicate is refused.
  def duplicate_of_failed_job_refused
    wait_until(timeout: 30) { attempts("f1") >= 1 }
    refused = ComboJob.perform_async("t3", "f1", "flaky")
    expect(refused).to be_nil unless done.include?("f1")
  end

  # ferrolock's uniqueness and DualLock keys left once every job finished: none. (FairTenant's
  # counts stay until they expire, as does the idle limiter's key: its slots are checked apart.)
  def locks_left
    redis.keys("ferrolock:*").grep(/unique:|dual/).to_h { |key| [key, [redis.type(key), redis.pttl(key)]] }
  end

  %w[forward reverse].each do |order|
    chains = [ComboChains::CLIENT, ComboChains::SERVER].map do |chain|
      ComboChains.ordered(chain, order).map { |m| m.name.delete_prefix("Ferrolock::") }.join(", ")
    end.join(" / ")

    it "runs every job exactly once and leaves no lock (#{chains})", time_limit: 100 do
      client_chain(order)
      rerouted = []
      subscription = Ferrolock.subscribe(:rerouted) { |_event, payload| rerouted << payload[:jid] }
      ids = nil
      with_sidekiq(app, concurrency: 5, queues: %w[combo combo_slow], env: { "COMBO_ORDER" => order }) do |sidekiq|
        ids = reschedule_behind_blockers + push_the_rest
        redis.set("combo:gate", "1")
        duplicate_of_failed_job_refused
        wait_until(timeout: 60, what: -> { "every job done (#{done.sort} of #{ids.sort}); log:\n#{sidekiq.log}" }) do
          (ids - done).empty?
        end
        sleep 1 # a second run or a leftover reschedule would land now
        expect([Sidekiq::RetrySet.new.size, Sidekiq::DeadSet.new.size, Sidekiq::ScheduledSet.new.size])
          .to eq([0, 0, 0]), sidekiq.log
      end
      Ferrolock.unsubscribe(subscription)

      expect(done.tally).to eq(ids.to_h { |id| [id, 1] })
      expect(ids.to_h { |id| [id, attempts(id)] }).to eq(ids.to_h { |id| [id, id.start_with?("f") ? 2 : 1] })
      runs = redis.lrange("combo:runs", 0, -1).map(&:split)
      # The retry is the same job (its jid), not a duplicate let in.
      expect(runs.group_by(&:first).transform_values { |r| r.map(&:last).uniq.size }.values.uniq).to eq([1])
      # Reroutes happened, and every rerouted job that was pushed ran. (FairTenant first: it also
      # counts and reroutes duplicates that the uniqueness middleware then refuses.)
      expect(rerouted & @jids).not_to be_empty
      expect((rerouted & @jids) - runs.map(&:last)).to eq([])
      expect(redis.get("combo:max").to_i).to be_between(1, 2)
      expect(ComboProbe::LIMITER.status[:in_use]).to eq(0)
      expect(locks_left).to eq({})
    end
  end
end
