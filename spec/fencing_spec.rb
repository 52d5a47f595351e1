# frozen_string_literal: true

require "spec_helper"

# Fencing tokens stay strictly increasing per name even across an idle period in which all of
# the name's keys expired (the counter has a TTL of 10 lock TTLs, so Redis is left clean); and
# fencing: false, which issues none.
RSpec.describe "DistMutex fencing tokens" do
  let(:redis) { FerrolockTest.redis_server.redis }

  # A storage layer that remembers the last token it saw and rejects older ones.
  let(:store) do
    Class.new do
      attr_reader :last

      def write(token)
        raise "stale token #{token} <= #{@last}" if @last && token <= @last

        @last = token
      end
    end.new
  end

  def wait_until_redis_is_empty
    wait_until(timeout: 30, interval: 0.05) { redis.dbsize.zero? }
  end

  [
    ["released at unlock", { lease: 0.1 }],
    ["a spacer", { expire: 0.1, auto_release: false }]
  ].each do |label, options|
    it "are accepted by a store that kept the last one (#{label})" do
      m = Ferrolock::DistMutex.new("fenced-#{label}", **options)
      3.times do
        m.synchronize { store.write(m.fencing_token) }
        wait_until_redis_is_empty # the lock, its fencing counter and everything else expired
      end
      expect(store.last).to be_a(Integer).and be_positive
    end
  end

  it "keeps growing across holders in other processes" do
    m = Ferrolock::DistMutex.new("fenced-fork", lease: 0.1)
    first = m.synchronize { m.fencing_token }
    wait_until_redis_is_empty
    reader, writer = IO.pipe
    pid = fork do
      reader.close
      child = Ferrolock::DistMutex.new("fenced-fork", lease: 0.1)
      writer.puts(child.synchronize { child.fencing_token })
      exit!(0)
    end
    writer.close
    Process.wait(pid)
    second = Integer(reader.read)
    expect(second).to be > first
    expect(m.synchronize { m.fencing_token }).to be > second
  end

  describe "fencing: false" do
    it "gives holds no token, writes no counter and shows none in Admin, next to fenced holders" do
      fenced = Ferrolock::DistMutex.new("unfenced")
      unfenced = Ferrolock::DistMutex.new("unfenced", fencing: false)
      last = fenced.synchronize { fenced.fencing_token }
      seen = unfenced.synchronize do
        # The counter keeps the fenced holder's token, which Admin does not show as this hold's.
        mutex = Ferrolock::Admin.new.show("unfenced").first
        [unfenced.fencing_token, redis.get("ferrolock:{unfenced}:fence").to_i, mutex.fencing_token,
         mutex.holder.since_clock]
      end
      expect(seen).to eq([nil, last, nil, :holder])
      expect(fenced.synchronize { fenced.fencing_token }).to be > last
    end

    it "is refused for an expiry-only lock, naming the argument" do
      expect { Ferrolock::DistMutex.new("spaced", expire: 1, auto_release: false, fencing: false) }
        .to raise_error(ArgumentError, /fencing: false needs auto_release/)
      expect { Ferrolock::DistMutex.new("spaced", fencing: "no") }.to raise_error(TypeError, /fencing/)
    end
  end
end
