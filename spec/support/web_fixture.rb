# frozen_string_literal: true

# Holds one of everything the "Locks" tab and the `ferrolock` command show, in this process,
# until stdin closes (run as a child: `ruby -Ilib spec/support/web_fixture.rb`): DistMutexes
# (one with a hostile name and a waiter), a DualLock running with a duplicate waiting, a
# ConcurrentLimiter with two slots taken, FairTenant counts and Shoryuken markers. Prints
# "ready" once everything is held.
require "ferrolock"

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
      threads
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
      lock = Ferrolock::Shoryuken::Lock.new(enabled: true)
      lock.call(Object.new, QUEUE, message.new("m-processed")) { nil }
      Thread.new { lock.call(Object.new, QUEUE, message.new("m-running")) { (gate << true) && release.pop } }
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
