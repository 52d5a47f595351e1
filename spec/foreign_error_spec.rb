# frozen_string_literal: true

require "spec_helper"

# A `rescue StandardError` guarding the caller's own code (a job class's options or key method)
# must not swallow or rewrap a timeout sent from outside: on Ruby 3.1, Timeout.timeout(sec, klass)
# raises `klass` (a StandardError) wherever the block happens to be. And Validate must answer a
# BasicObject (no is_a?, respond_to?, inspect) with a TypeError naming the argument.
RSpec.describe "foreign exceptions and hostile values" do
  # Raised into the code under test by Timeout.timeout, as an app's own timeout would be.
  outer_timeout = Class.new(Timeout::Error)

  # Stalls (far longer than the timeout) only while a test asks it to, so other specs' boot
  # checks walking every loaded class are not slowed down.
  stalling = Class.new do
    def self.stall
      sleep 10 if Thread.current[:ferrolock_spec_stall]
    end

    def self.get_sidekiq_options # rubocop:disable Naming/AccessorMethodName -- Sidekiq's name
      stall
      { "dual_lock" => true }
    end

    def self.dual_lock_key(*)
      stall
      "key"
    end
  end

  def stalled(&block)
    Thread.current[:ferrolock_spec_stall] = true
    started = Ferrolock.monotonic
    block.call
  ensure
    Thread.current[:ferrolock_spec_stall] = nil
    # A swallowed timeout would have let the 10 s stall run to its end.
    expect(Ferrolock.monotonic - started).to be < 8
  end

  before { stub_const("FerrolockSpecStallingJob", stalling) }

  it "lets an outer timeout through a boot check walking the job classes" do
    stalled do
      expect { Timeout.timeout(0.2, outer_timeout) { Ferrolock::JobClasses.with_option("dual_lock") } }
        .to raise_error(outer_timeout)
    end
    # Not stalled, the class is found as before.
    expect(Ferrolock::JobClasses.with_option("dual_lock")).to include(stalling)
  end

  it "lets an outer timeout through a DualLock key method with its own class" do
    settings = Ferrolock::Sidekiq::DualLock::Settings.new(stalling, true)
    stalled do
      expect { Timeout.timeout(0.2, outer_timeout) { settings.key_for([1]) } }.to raise_error(outer_timeout)
    end
    # The key method's own failure is still named and wrapped.
    allow(stalling).to receive(:dual_lock_key).and_raise(KeyError, "no such record")
    expect { settings.key_for([1]) }
      .to raise_error(Ferrolock::Error, /dual_lock_key raised KeyError: no such record/)
  end

  it "tells a foreign timeout from the code's own failure" do
    expect(Ferrolock::ForeignError === outer_timeout.new).to be(true) # rubocop:disable Style/CaseEquality
    expect(Ferrolock::ForeignError === RuntimeError.new).to be(false) # rubocop:disable Style/CaseEquality
  end

  describe "Validate with a BasicObject" do
    hostile = BasicObject.new
    validate = Ferrolock::Validate
    # method => [the argument it names, the call]
    checks = {
      "name!" => [:name, -> { validate.name!(:name, hostile) }],
      "text!" => [:token, -> { validate.text!(:token, hostile) }],
      "float!" => [:lease, -> { validate.float!(:lease, hostile) }],
      "seconds!" => [:ttl, -> { validate.seconds!(:ttl, hostile) }],
      "count!" => [:limit, -> { validate.count!(:limit, hostile, min: 0) }],
      "positive_integer!" => [:count, -> { validate.positive_integer!(:count, hostile) }],
      "path!" => [:ca_file, -> { validate.path!(:ca_file, hostile) }],
      "boolean!" => [:enabled, -> { validate.boolean!(:enabled, hostile) }]
    }
    checks.each do |method, (arg, call)|
      it "#{method} raises a TypeError naming the argument" do
        expect(&call).to raise_error(TypeError, /\A#{arg} must be .*, got #<BasicObject:0x\h+>\z/)
      end
    end

    it "client! and delay answer too" do
      expect { validate.client!(hostile) }
        .to raise_error(TypeError, "client must be a Ferrolock::Client, got BasicObject")
      expect(validate.delay(hostile)).to be_nil
    end

    it "reaches the primitives' constructors as a TypeError" do
      expect { Ferrolock::DistMutex.new("spec", lease: hostile) }.to raise_error(TypeError, /lease/)
      expect { Ferrolock::DistMutex.new("spec", expire: hostile) }.to raise_error(TypeError, /expire/)
      expect { Ferrolock::DistMutex.new("spec").lock(timeout: hostile) }.to raise_error(TypeError, /timeout/)
      expect { Ferrolock::DistMutex.new("spec", min_replicas_acked: hostile) }
        .to raise_error(TypeError, /min_replicas_acked/)
      expect { Ferrolock::Client.new(url: hostile) }.to raise_error(TypeError, /url/)
      expect { Ferrolock::Client.new(cluster: hostile) }.to raise_error(TypeError, /cluster/)
      expect { Ferrolock::Configuration.new.logger = hostile }.to raise_error(TypeError, /logger/)
      expect { Ferrolock::Configuration.new.redis_url = hostile }.to raise_error(TypeError, /redis_url/)
      expect { Ferrolock.subscribe(hostile) { nil } }.to raise_error(TypeError, /event names/)
      [hostile, [hostile], [{ queue: hostile, threshold: 1, per: 1 }]].each do |rules|
        expect { Ferrolock::FairTenant::Rules.parse(rules) }.to raise_error(TypeError, /fair_tenant_queues/)
      end
      expect { Ferrolock::ConcurrentLimiter.new(hostile, 1) }.to raise_error(TypeError, /name/)
      expect { Ferrolock::ConcurrentLimiter.new("spec", hostile) }.to raise_error(TypeError, /count/)
      expect { Ferrolock::Admin.new.show(hostile) }.to raise_error(TypeError, /name/)
      expect { Ferrolock::Admin.new.locks(hostile) }.to raise_error(TypeError, /pattern/)
      expect { Ferrolock::Admin.new.force_release("spec", kind: hostile) }.to raise_error(ArgumentError, /kind/)
      expect { Ferrolock::Admin.new.force_release("spec", token: hostile) }.to raise_error(TypeError, /token/)
      expect { Ferrolock::Admin.new.tenants(hostile) }.to raise_error(TypeError, /job_class/)
      expect { Ferrolock::Admin.new.locks(cursor: hostile) }.to raise_error(ArgumentError, /cursor/)
    end
  end
end
