# frozen_string_literal: true

# Holds one of everything the "Locks" tab and the `ferrolock` command show, in this process,
# until stdin closes (run as a child: `ruby -Ilib spec/support/web_fixture.rb`): DistMutexes
# (one with a hostile name and a waiter), a DualLock running with a duplicate waiting, a
# ConcurrentLimiter with two slots taken, FairTenant counts, Shoryuken markers, Sidekiq uniqueness
# locks (two pushed digests, one with a hostile class name, and a while_executing job running)
# and rate limiters in use (one with a reservation waiting). Prints "ready" once everything is held.
# Loading it (the web process, `ferrolock --require`) defines the rate limiters and the unique
# job class, as an app's code would: their limits and lock type are not in Redis.
require "digest"
require "ferrolock"
require "ferrolock/admin"

module FerrolockTest
  module WebFixture
    HOSTILE = %(report:<script>alert("x")</script>'q)
    MUTEX = "invoice:42"
    # MUTEX is held inside this Sidekiq job (the thread-local Sidekiq's JobLogger sets).
    JOB = { class: "InvoiceJob", jid: "b4a1c3e2d5f6a7b8c9d0e1f2" }.freeze
    DUAL = "sync:account-7"
    LIMITER = "api:partner"
    JOB_CLASS = "FerrolockWebHeavyJob"
    RULES = [{ queue: "slow", threshold: 2, per: 3600 }].freeze
    TENANTS = { "acme" => 3, "<b>tiny</b>" => 1 }.freeze
    MESSAGES = { "m-processed" => :processed, "m-running" => :running }.freeze
    QUEUE = "orders"
    # Uniqueness digests (UniqueDigest's shape), each pushed job's jid, and a while_executing job
    # running inside Sidekiq's job context.
    UNIQUE = "unique:ReportUniqueJob:#{Digest::SHA256.hexdigest("fixture report")}".freeze
    UNIQUE_JID = "5e1f0a2b3c4d5e6f7a8b9c0d"
    UNIQUE_HOSTILE = %(unique:Evil<script>alert("u")</script>Job:#{Digest::SHA256.hexdigest("fixture evil")}).freeze
    UNIQUE_RUNNING = "unique:SyncUniqueJob:#{Digest::SHA256.hexdigest("fixture sync")}".freeze
    RUNNING_JOB = { class: "SyncUniqueJob", jid: "a1b2c3d4e5f6a7b8c9d0e1f2" }.freeze
    # Rate limiters of the app (own names): 2 of 3 used (per 30 days: a fixed window's boundary, a
    # multiple of the interval since the epoch, falls inside a run once in years); 2 of 2 used and
    # a third call reserved a slot 30 minutes on; 1 of 5; a hostile name spending 4 of 10 points.
    RATE_LIMITERS = {
      window: Ferrolock::RateLimiter.window("fixture:partner-api", 3, 30 * 86_400),
      bucket: Ferrolock::RateLimiter.bucket("fixture:sms", 2, :hour),
      sliding: Ferrolock::RateLimiter.window("fixture:search", 5, :hour, sliding: true),
      points: Ferrolock::RateLimiter.points("fixture:<b>tiny</b>", 10, :hour)
    }.freeze

    module_function

    def hold_everything
      threads = []
      gate = Queue.new
      release = Queue.new
      [HOSTILE, MUTEX].each do |name|
        threads << holder(gate, release) do |go|
          Thread.current[:sidekiq_context] = JOB.dup if name == MUTEX
          Ferrolock::DistMutex.new(name).synchronize(&go)
        end
      end
      2.times { gate.pop }
      # A waiter for the hostile name: a force release hands it the lock.
      threads << Thread.new { Ferrolock::DistMutex.new(HOSTILE).synchronize { release.pop } }
      threads << holder(gate, release) { |go| Ferrolock::DualLock.new(DUAL).synchronize(&go) }
      gate.pop
      threads << Thread.new { Ferrolock::DualLock.new(DUAL).synchronize { release.pop } }
      limiter = Ferrolock::ConcurrentLimiter.new(LIMITER, 3)
      2.times { threads << holder(gate, release) { |go| limiter.within_limit(&go) } }
      2.times { gate.pop }
      count_tenants
      threads << mark_messages(gate, release)
      gate.pop
      threads << hold_uniques(gate, release)
      gate.pop
      threads << use_rate_limiters
      threads
    end

    # The push-time locks of two digests, and a while_executing job's run lock held in its job.
    def hold_uniques(gate, release)
      Ferrolock::Sidekiq::Unique::Lock.new(UNIQUE).take(UNIQUE_JID, 3600)
      Ferrolock::Sidekiq::Unique::Lock.new(UNIQUE_HOSTILE).take("hostile-jid", 3600)
      holder(gate, release) do |go|
        Thread.current[:sidekiq_context] = RUNNING_JOB.dup
        Ferrolock::DistMutex.new(Ferrolock::InternalName.new("#{UNIQUE_RUNNING}:run")).synchronize(&go)
      end
    end

    # Returns the thread sleeping until its reserved slot (once Redis shows the reservation).
    def use_rate_limiters
      2.times { RATE_LIMITERS[:window].within_limit { nil } }
      2.times { RATE_LIMITERS[:bucket].within_limit { nil } }
      RATE_LIMITERS[:sliding].within_limit { nil }
      RATE_LIMITERS[:points].within_limit(4) { nil }
      reserved = Thread.new { RATE_LIMITERS[:bucket].within_limit(wait_timeout: 3600) { nil } }
      admin = Ferrolock::Admin.new
      deadline = Ferrolock.monotonic + 30
      until admin.rate_limiters("fixture:sms").items.first&.reserved == 1
        raise "the bucket's reservation did not show within 30 s" if Ferrolock.monotonic > deadline

        sleep 0.01
      end
      reserved
    end

    # A thread that takes something (the block yields `go`), signals `gate`, holds until `release`.
    def holder(gate, release)
      Thread.new do
        yield(lambda do
          gate << true
          release.pop
        end)
      end
    end

    def count_tenants
      TENANTS.each do |tenant, times|
        times.times do |i|
          Ferrolock::FairTenant.queue_for(RULES, job_class: JOB_CLASS, tenant: tenant, jid: "#{tenant}-#{i}",
                                                 queue: "default")
        end
      end
    end

    def mark_messages(gate, release)
      message = Struct.new(:message_id)
      lock = Ferrolock::Shoryuken::LockMiddleware.new(enabled: true)
      lock.call(Object.new, QUEUE, message.new("m-processed")) { nil }
      Thread.new { lock.call(Object.new, QUEUE, message.new("m-running")) { (gate << true) && release.pop } }
    end
  end
end

# Stands in for a Sidekiq job class with a uniqueness option (the read model only asks
# get_sidekiq_options; Sidekiq need not be loaded where this file is).
unless defined?(ReportUniqueJob)
  class ReportUniqueJob
    def self.get_sidekiq_options # rubocop:disable Naming/AccessorMethodName -- Sidekiq's name
      { "lock" => :until_executed, "queue" => "default" }
    end
  end
end

if $PROGRAM_NAME == __FILE__
  Ferrolock.logger.level = :error
  FerrolockTest::WebFixture.hold_everything
  $stdout.puts("ready")
  $stdout.flush
  $stdin.read
  exit!(0)
end
