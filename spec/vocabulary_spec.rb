# frozen_string_literal: true

# Issue 25's one vocabulary: wait_timeout (how long a caller waits), lease (a hold's TTL, renewed while
# the holder lives), ttl (how long a key lives without renewal). Each old name still works, logs one
# warning per (owner, name) per process, and refuses to be given together with its new name.
RSpec.describe "One vocabulary" do
  let(:warnings) { [] }

  before do
    Ferrolock::Deprecation.reset!
    allow(Ferrolock.logger).to receive(:warn) { |line| warnings << line }
  end

  def deprecation_warnings(old)
    warnings.grep(/: #{old} is deprecated, use /)
  end

  # A job class with these sidekiq_options, without loading Sidekiq (the settings only call
  # get_sidekiq_options and name).
  def self.job_class(**options)
    Class.new do
      define_singleton_method(:get_sidekiq_options) { options.transform_keys(&:to_s) }
      define_singleton_method(:name) { "VocabularyJob" }
    end
  end

  def job_class(**options)
    self.class.job_class(**options)
  end

  # Each old name: built with it, with its new name, with both; [old name, new name].
  shoryuken = lambda { |options|
    Ferrolock::Shoryuken.settings_for(Ferrolock::Shoryuken::Options.validate(options, "chain"), nil)
  }
  {
    "DistMutex#lock(timeout:)" => {
      old: ->(v) { Ferrolock::DistMutex.new("m").tap { |m| m.lock(timeout: v) }.tap(&:unlock) },
      new: ->(v) { Ferrolock::DistMutex.new("m").tap { |m| m.lock(wait_timeout: v) }.tap(&:unlock) },
      both: -> { Ferrolock::DistMutex.new("m").lock(timeout: 1, wait_timeout: 1) },
      names: %w[timeout wait_timeout]
    },
    "DistMutex#synchronize(timeout:)" => {
      old: ->(v) { Ferrolock::DistMutex.new("m").synchronize(timeout: v) { :ran } },
      new: ->(v) { Ferrolock::DistMutex.new("m").synchronize(wait_timeout: v) { :ran } },
      both: -> { Ferrolock::DistMutex.new("m").synchronize(timeout: 1, wait_timeout: 1) { :ran } },
      names: %w[timeout wait_timeout]
    },
    "DualLock.new(max_wait:)" => {
      old: ->(v) { Ferrolock::DualLock.new("d", max_wait: v).wait_timeout },
      new: ->(v) { Ferrolock::DualLock.new("d", wait_timeout: v).wait_timeout },
      both: -> { Ferrolock::DualLock.new("d", max_wait: 1, wait_timeout: 1) },
      names: %w[max_wait wait_timeout]
    },
    "DualLock.new(exec_ttl:)" => {
      old: ->(v) { Ferrolock::DualLock.new("d", exec_ttl: v).lease },
      new: ->(v) { Ferrolock::DualLock.new("d", lease: v).lease },
      both: -> { Ferrolock::DualLock.new("d", exec_ttl: 1, lease: 1) },
      names: %w[exec_ttl lease]
    },
    "DualLock.new(wait_ttl:)" => {
      old: ->(v) { Ferrolock::DualLock.new("d", wait_ttl: v).wait_lease },
      new: ->(v) { Ferrolock::DualLock.new("d", wait_lease: v).wait_lease },
      both: -> { Ferrolock::DualLock.new("d", wait_ttl: 1, wait_lease: 1) },
      names: %w[wait_ttl wait_lease]
    },
    "ConcurrentLimiter.new(lock_timeout:)" => {
      old: ->(v) { Ferrolock::ConcurrentLimiter.new("c", 1, lock_timeout: v).lease },
      new: ->(v) { Ferrolock::ConcurrentLimiter.new("c", 1, lease: v).lease },
      both: -> { Ferrolock::ConcurrentLimiter.new("c", 1, lock_timeout: 1, lease: 1) },
      names: %w[lock_timeout lease]
    },
    "Shoryuken::MessageLock.new(lock_ttl:)" => {
      old: ->(v) { Ferrolock::Shoryuken::MessageLock.new(lock_ttl: v).lease },
      new: ->(v) { Ferrolock::Shoryuken::MessageLock.new(lease: v).lease },
      both: -> { Ferrolock::Shoryuken::MessageLock.new(lock_ttl: 1, lease: 1) },
      names: %w[lock_ttl lease]
    },
    "Shoryuken middleware option lock_ttl" => {
      old: ->(v) { shoryuken.call({ lock_ttl: v }).lease },
      new: ->(v) { shoryuken.call({ lease: v }).lease },
      both: -> { Ferrolock::Shoryuken::Options.validate({ lock_ttl: 1, lease: 1 }, "chain") },
      names: %w[lock_ttl lease]
    },
    "Sidekiq dual_lock option max_wait" => {
      old: ->(v) { Ferrolock::Sidekiq::DualLock::Settings.for(job_class(dual_lock: { max_wait: v })).wait_timeout },
      new: ->(v) { Ferrolock::Sidekiq::DualLock::Settings.for(job_class(dual_lock: { wait_timeout: v })).wait_timeout },
      both: -> { Ferrolock::Sidekiq::DualLock::Settings.for(job_class(dual_lock: { max_wait: 1, wait_timeout: 1 })) },
      names: %w[max_wait wait_timeout]
    },
    "Sidekiq dual_lock option exec_ttl" => {
      old: ->(v) { Ferrolock::Sidekiq::DualLock::Settings.for(job_class(dual_lock: { "exec_ttl" => v })).lease },
      new: ->(v) { Ferrolock::Sidekiq::DualLock::Settings.for(job_class(dual_lock: { "lease" => v })).lease },
      both: -> { Ferrolock::Sidekiq::DualLock::Settings.for(job_class(dual_lock: { exec_ttl: 1, lease: 1 })) },
      names: %w[exec_ttl lease]
    },
    "Sidekiq dual_lock option wait_ttl" => {
      old: ->(v) { Ferrolock::Sidekiq::DualLock::Settings.for(job_class(dual_lock: { wait_ttl: v })).wait_lease },
      new: ->(v) { Ferrolock::Sidekiq::DualLock::Settings.for(job_class(dual_lock: { wait_lease: v })).wait_lease },
      both: -> { Ferrolock::Sidekiq::DualLock::Settings.for(job_class(dual_lock: { wait_ttl: 1, wait_lease: 1 })) },
      names: %w[wait_ttl wait_lease]
    },
    "uniqueness option lock_lease" => {
      old: lambda { |v|
             Ferrolock::Sidekiq::Unique::Settings.for(job_class(lock: :until_executed, lock_lease: v), {}).lease
           },
      new: ->(v) { Ferrolock::Sidekiq::Unique::Settings.for(job_class(lock: :until_executed, lease: v), {}).lease },
      both: lambda {
              Ferrolock::Sidekiq::Unique::Settings.for(job_class(lock: :until_executed, lock_lease: 1, lease: 2), {})
            },
      names: %w[lock_lease lease]
    }
  }.each do |label, take|
    describe label do
      old, new = take[:names]

      it "keeps working under #{old}, warning once however often it is used" do
        expect(take[:old].call(2)).not_to be_nil
        expect(take[:old].call(3)).not_to be_nil
        warnings = deprecation_warnings(old)
        expect(warnings.size).to eq(1)
        expect(warnings.first).to include("use #{new}")
      end

      it "works under #{new}, without a warning" do
        expect(take[:new].call(2)).not_to be_nil
        expect(warnings.grep(/deprecated/)).to eq([])
      end

      it "refuses #{old} and #{new} together, naming both" do
        expect { take[:both].call }.to raise_error(ArgumentError, /(?=.*\b#{new}\b)(?=.*\b#{old}\b)/)
      end
    end
  end

  it "reads back the value given under an old name, unchanged" do
    lock = Ferrolock::DualLock.new("d", exec_ttl: 7, wait_ttl: 8, max_wait: nil)
    expect([lock.lease, lock.wait_lease, lock.wait_timeout]).to eq([7.0, 8.0, nil])
    expect(Ferrolock::ConcurrentLimiter.new("c", 1, lock_timeout: 9).lease).to eq(9.0)
    expect(Ferrolock::Shoryuken::MessageLock.new(lock_ttl: 4).lease).to eq(4.0)
  end

  it "names the old argument in a bad value's error" do
    expect { Ferrolock::ConcurrentLimiter.new("c", 1, lock_timeout: 0) }.to raise_error(ArgumentError, /lock_timeout/)
    expect { Ferrolock::DualLock.new("d", max_wait: -1) }.to raise_error(ArgumentError, /max_wait/)
    expect { Ferrolock::DistMutex.new("m").lock(timeout: -1) }.to raise_error(ArgumentError, /\btimeout/)
  end

  it "times a DistMutex wait out under wait_timeout: as under timeout:" do
    holder = Ferrolock::DistMutex.new("busy")
    holder.lock
    expect { Ferrolock::DistMutex.new("busy").lock(wait_timeout: 0.05) }.to raise_error(Ferrolock::TimeoutError)
    expect { Ferrolock::DistMutex.new("busy").lock(timeout: 0.05) }.to raise_error(Ferrolock::TimeoutError)
  ensure
    holder&.unlock
  end

  describe "uniqueness: sidekiq-unique-jobs' names" do
    it "accepts lock_ttl and lock_timeout without a warning (the README promises its option names)" do
      klass = job_class(lock: :while_executing, lock_ttl: 60, lock_timeout: 2)
      settings = Ferrolock::Sidekiq::Unique::Settings.for(klass, {})
      expect([settings.ttl, settings.wait_timeout]).to eq([60.0, 2.0])
      expect(warnings.grep(/deprecated/)).to eq([])
    end

    it "accepts ttl and wait_timeout, and refuses either together with its other name" do
      settings = Ferrolock::Sidekiq::Unique::Settings.for(job_class(lock: :while_executing, ttl: 60, wait_timeout: 2),
                                                          {})
      expect([settings.ttl, settings.wait_timeout]).to eq([60.0, 2.0])
      expect { Ferrolock::Sidekiq::Unique::Settings.for(job_class(lock: :until_expired, ttl: 1, lock_ttl: 1), {}) }
        .to raise_error(ArgumentError, /VocabularyJob.*ttl or lock_ttl/)
    end

    it "lets a per-push new name win over the class's old one (Sidekiq copies the class's options into the job)" do
      klass = job_class(lock: :until_expired, lock_ttl: 3600)
      job = { "class" => "VocabularyJob", "lock" => "until_expired", "lock_ttl" => 3600, "ttl" => 5 }
      expect(Ferrolock::Sidekiq::Unique::Settings.for(klass, job).ttl).to eq(5.0)
    end
  end

  describe "event payloads" do
    def events_of(event)
      seen = []
      subscription = Ferrolock.subscribe(event) { |_name, payload| seen << payload }
      yield
      seen
    ensure
      Ferrolock.unsubscribe(subscription) if subscription
    end

    it "carry :name and :job_class beside the older :key and :class" do
      seen = events_of(:acquired) { Ferrolock::DualLock.new("k").run(tags: { class: "SomeJob" }) { :ran } }
      expect(seen.first).to include(name: "k", key: "k", job_class: "SomeJob", class: "SomeJob")
    end

    it "carry :job_class beside Shoryuken's :worker" do
      seen = events_of(:skipped) { Ferrolock.instrument(:skipped, primitive: :shoryuken_lock, worker: "W") }
      expect(seen.first).to include(job_class: "W", worker: "W")
    end
  end

  describe "middleware class names" do
    # Each old name warns once per process, when its file is autoloaded: a fresh process counts them.
    it "makes the old constants the same class as the new ones, warning once" do
      2.times { expect(Ferrolock::FairTenant::ClientMiddleware).to be(Ferrolock::Sidekiq::FairTenantMiddleware) }
      2.times { expect(Ferrolock::Shoryuken::Lock).to be(Ferrolock::Shoryuken::LockMiddleware) }
      out = run_ruby!(<<~RUBY)
        require "logger"
        require "stringio"
        require "ferrolock"
        log = StringIO.new
        Ferrolock.configure { |c| c.logger = Logger.new(log) }
        2.times { Ferrolock::FairTenant::ClientMiddleware && Ferrolock::Shoryuken::Lock }
        puts log.string.scan(/: (ClientMiddleware|Lock) is deprecated/).flatten.inspect
      RUBY
      expect(out.lines.last.chomp).to eq('["ClientMiddleware", "Lock"]')
      expect(Ferrolock::Sidekiq::FairTenantMiddleware.name).to eq("Ferrolock::Sidekiq::FairTenantMiddleware")
      expect(Ferrolock::Shoryuken::LockMiddleware.name).to eq("Ferrolock::Shoryuken::LockMiddleware")
    end

    it "still raises NameError for other missing constants" do
      expect { Ferrolock::Shoryuken.const_get(:Nope) }.to raise_error(NameError)
      expect { Ferrolock::FairTenant.const_get(:Nope) }.to raise_error(NameError)
    end
  end

  # Logger rescues what lands in its write (logger 1.5: any Exception), so the warning is logged with
  # interrupts deferred: a Thread#raise (or Timeout) meanwhile arrives after the line, not lost.
  it "logs a deprecation warning with interrupts deferred: an exception raised meanwhile still arrives" do
    writing = Queue.new
    go_on = Queue.new
    device = Object.new
    # Only the example's thread waits in its write: a background thread of ferrolock's that logs
    # meanwhile writes nothing and goes on.
    device.define_singleton_method(:write) do |*|
      next 0 unless Thread.current[:vocabulary_interrupted]

      writing << true
      go_on.pop
      0
    end
    device.define_singleton_method(:close) { nil }
    allow(Ferrolock).to receive(:logger).and_return(Logger.new(device))
    injected = Class.new(StandardError)
    thread = Thread.new do
      Thread.current[:vocabulary_interrupted] = true
      Ferrolock::DualLock.new("vocabulary-interrupted", max_wait: 1)
      :not_raised
    rescue injected
      :raised
    end
    Timeout.timeout(5) { writing.pop }
    thread.raise(injected)
    go_on << true
    expect(thread.value).to eq(:raised)
  end
end
