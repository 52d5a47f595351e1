# frozen_string_literal: true

require "sidekiq"

# Issue 24, item 3: a child made by plain `fork` (no block) inside a held block leaves that block
# too (normally or by `exit`), yet the parent still holds the lock and renews it. The child must
# never release, renew or mark what its parent holds; a third process sees it held throughout.
RSpec.describe "fork inside a held block" do
  let(:server) { FerrolockTest.redis_server }
  let(:client) { Ferrolock::Client.new(url: server.url) }

  # Yields `inside`, a lambda to call inside the held block: it forks a child, which leaves that
  # block the way `leave` says (:end: the block ends normally, the lambda returning :child; :exit:
  # the child calls exit there) and then ends; in the parent it waits for that child and returns
  # what its own block (run with the lock still held) returns.
  def forking(leave)
    parent = Process.pid
    inside = lambda do |&check|
      child = fork
      if child.nil?
        raise SystemExit if leave == :exit

        next :child
      end
      _, status = Timeout.timeout(20) { Process.wait2(child) }
      expect(status.exitstatus).to eq(0)
      check.call
    end
    yield inside
  ensure
    # The child has left the held block by now (its ensure clauses ran): it ends here, before it
    # returns into RSpec.
    Process.exit!(0) if Process.pid != parent
  end

  # Runs the section in a process of its own (not inheriting any block): true or false.
  def in_third_process
    reader, writer = IO.pipe
    pid = fork do
      reader.close
      writer.write(yield ? "1" : "0")
      exit!(0)
    rescue Exception => e # rubocop:disable Lint/RescueException
      warn "third process failed: #{e.class}: #{e.message}"
      exit!(1)
    end
    writer.close
    answer = reader.read
    Timeout.timeout(20) { Process.wait(pid) }
    answer == "1"
  ensure
    reader&.close
  end

  # Outlives the section: the child must not have released it.
  def lock_lost_events
    events = []
    # Only this file's locks: a lock another spec left held may be lost at any moment.
    subscription = Ferrolock.subscribe(:lock_lost) do |_, payload|
      events << payload if payload[:name].to_s.start_with?("fork:")
    end
    yield
    events
  ensure
    Ferrolock.unsubscribe(subscription)
  end

  %i[end exit].each do |leave|
    context "when the child #{leave == :end ? "leaves the block" : "calls exit inside it"}" do
      it "keeps a ConcurrentLimiter slot taken until the parent leaves" do
        limiter = Ferrolock::ConcurrentLimiter.new("fork:limiter:#{leave}", 1, wait_timeout: 0, client: client)
        free = -> { limiter.within_limit(wait_timeout: 0) { true } rescue false } # rubocop:disable Style/RescueModifier
        taken = nil
        events = lock_lost_events do
          taken = forking(leave) do |inside|
            limiter.within_limit { inside.call { !in_third_process(&free) } }
          end
        end
        expect(taken).to be(true)
        expect(events).to eq([])
        expect(in_third_process(&free)).to be(true)
      end

      it "keeps a DualLock's EXEC stage until the parent leaves" do
        lock = Ferrolock::DualLock.new("fork:dual:#{leave}", client: client)
        executing = nil
        events = lock_lost_events do
          forking(leave) do |inside|
            lock.run { executing = inside.call { in_third_process { lock.executing? } } }
          end
        end
        expect(executing).to be(true)
        expect(events).to eq([])
        expect(lock.executing?).to be(false)
      end

      it "keeps a DistMutex held until the parent leaves" do
        mutex = Ferrolock::DistMutex.new("fork:mutex:#{leave}", client: client)
        held = forking(leave) do |inside|
          mutex.synchronize { inside.call { in_third_process { mutex.locked? } } }
        end
        expect(held).to be(true)
        expect(mutex.locked?).to be(false)
      end

      it "never marks a message processed for the parent: the parent's failure lets the next copy run" do
        lock = Ferrolock::Shoryuken::MessageLock.new(lock_ttl: 30, client: client)
        key = lock.state_key("orders", "m-#{leave}")
        state = nil
        forking(leave) do |inside|
          lock.process("orders", "m-#{leave}") do
            state = inside.call { server.redis.get(key) }
            raise ArgumentError, "the parent's job failed" unless state == :child
          end
        rescue ArgumentError
          nil
        end
        expect(state).not_to eq("processed")
        ran = false
        expect(lock.process("orders", "m-#{leave}") { ran = true }).to eq(:ran)
        expect(ran).to be(true)
      end

      it "keeps an until_executed uniqueness lock while the parent's job runs" do
        job_class = Class.new do
          include Sidekiq::Worker
          sidekiq_options lock: :until_executed
          def self.name = "ForkProbeJob"
        end
        stub_const("ForkProbeJob", job_class)
        job = { "class" => "ForkProbeJob", "jid" => "jid-fork-#{leave}", "args" => [1], "queue" => "default" }
        digest = Ferrolock::Sidekiq::Unique::Digest.for(Ferrolock::Sidekiq::Unique::Settings.for(job_class, job), job)
        unique = Ferrolock::Sidekiq::Unique::Lock.new(digest)
        held = nil
        forking(leave) do |inside|
          Ferrolock::Sidekiq::Unique::ServerMiddleware.new.call(job_class.new, job, "default") do
            held = inside.call { in_third_process { unique.holder == job["jid"] } }
          end
        end
        expect(held).to be(true)
        expect(unique.holder).to be_nil
      end
    end
  end

  it "leaves nothing to release when the child execs inside the block" do
    limiter = Ferrolock::ConcurrentLimiter.new("fork:exec", 1, wait_timeout: 0, client: client)
    limiter.within_limit do
      pid = fork { exec("true") }
      Timeout.timeout(20) { Process.wait(pid) }
      expect { limiter.within_limit(wait_timeout: 0) { nil } }.to raise_error(Ferrolock::OverLimit)
    end
  end
end
