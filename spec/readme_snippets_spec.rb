# frozen_string_literal: true

# Every ```ruby block of README.md runs verbatim, each in a fresh Ruby process against the test
# Redis (REDIS_URL), after `require "ferrolock"` and, when it names Sidekiq, `require "sidekiq"`.
# A new block that does not run fails this spec. The only additions are:
# - APP_CODE: stand-ins for the app's own methods and constants a block calls (build_report,
#   Record …), each added only to the blocks that call it;
# - SHORYUKEN: the shoryuken gem is not installable here, so a block naming Shoryuken gets a
#   minimal stand-in defining exactly the constants the README uses (Shoryuken.configure_server
#   yielding a config whose middleware chain builds what it is given, Shoryuken::Worker with
#   shoryuken_options, Shoryuken::Middleware::Server::AutoDelete).
require_relative "support/redis_cluster"
require_relative "support/redis_sentinel"

RSpec.describe "README.md ruby snippets" do
  readme = File.read(File.join(FerrolockTest::ROOT, "README.md"))
  snippets = readme.to_enum(:scan, /^```ruby\n(.*?)^```$/m).map do
    match = Regexp.last_match
    [readme[0, match.begin(0)].count("\n") + 1, match[1]]
  end

  app_code = {
    "StatsD" => "module StatsD; def self.increment(_name) = nil; end",
    "build_report" => "def build_report = :report",
    "fetch" => "def fetch(url) = url",
    "url" => 'def url = "https://example.com/"',
    "Record" => "Record = Struct.new(:id) { def self.find(id) = new(id) }",
    "mirror" => "def mirror(record) = record",
    "push_to_erp" => "def push_to_erp(order) = order",
    "order" => "def order = :order"
  }.freeze

  shoryuken = <<~RUBY
    module Shoryuken
      # Builds each middleware as Shoryuken would for a message, so bad arguments fail here.
      class StandInChain
        attr_reader :calls

        def initialize = @calls = []

        def insert_before(anchor, klass, *args)
          klass.new(*args)
          @calls << [:insert_before, anchor, klass]
        end

        def add(klass, *args)
          klass.new(*args)
          @calls << [:add, klass]
        end
      end

      class StandInConfig
        attr_reader :chain

        def initialize = @chain = StandInChain.new

        def server_middleware = yield(@chain)
      end

      def self.configure_server = yield(@config = StandInConfig.new)
      def self.server_chain = @config&.chain

      module Middleware
        module Server
          class AutoDelete; end
        end
      end

      module Worker
        def self.included(base) = base.extend(ClassMethods)

        module ClassMethods
          def shoryuken_options(options = {}) = @shoryuken_options = options.transform_keys(&:to_s)
        end
      end
    end
  RUBY

  # A name the block calls without defining it (not a method call on something, not a keyword label).
  calls = lambda do |code, name|
    code.match?(/(?<![.\w:@$])#{name}\b(?![:\w])/) && !code.match?(/(def|class|module) (self\.)?#{name}\b|#{name} =/)
  end

  # A snippet for a Redis Cluster or Sentinel runs against a real one (spec/support/redis_cluster.rb,
  # redis_sentinel.rb), its addresses in the environment variables ferrolock documents.
  def topology_env(code)
    env = {}
    env["FERROLOCK_REDIS_CLUSTER"] = FerrolockTest::RedisCluster.shared.urls.join(",") if code.include?("REDIS_CLUSTER")
    if code.include?("REDIS_SENTINELS")
      sentinel = FerrolockTest::RedisSentinel.shared
      env.merge!("FERROLOCK_REDIS_SENTINELS" => sentinel.urls(with_password: false).join(","),
                 "FERROLOCK_REDIS_SENTINEL_NAME" => FerrolockTest::RedisSentinel::NAME,
                 "FERROLOCK_REDIS_SENTINEL_PASSWORD" => sentinel.password)
    end
    env
  end

  it "has ruby snippets to run" do
    expect(snippets.size).to be >= 10
  end

  snippets.each do |line, code|
    first = code.lines.first.strip
    it "runs the snippet at README.md:#{line} (#{first[0, 60]})" do
      placeholders = code.lines.map { |l| l.sub(/#.*/, "") }.grep(/…|\.\.\.\s*$/)
      expect(placeholders).to eq([]), "README.md:#{line}: a placeholder is not Ruby (`…` parses as a method call)"
      prelude = [%(require "ferrolock")]
      prelude << %(require "sidekiq") if code.match?(/(?<![:\w])Sidekiq\b/)
      prelude << shoryuken if code.match?(/(?<![:\w])Shoryuken\b/)
      prelude.concat(app_code.select { |name, _| calls.call(code, name) }.values)
      script = [*prelude, "# ---- README.md:#{line}", code,
                "# ---- the configuration it leaves still gives a working client",
                %(abort "ferrolock client: \#{Ferrolock.client.ping.inspect}" unless Ferrolock.client.ping == "PONG"),
                %(p Shoryuken.server_chain&.calls if defined?(Shoryuken.server_chain))].join("\n")
      out, err, status = run_ruby(script, env: topology_env(code), timeout: 60)
      expect(status).to be_success, "README.md:#{line} failed (exit #{status.exitstatus}):\n#{err}\n#{out}"
      if code.include?("chain.insert_before Shoryuken::Middleware::Server::AutoDelete, Ferrolock::Shoryuken::Lock")
        expect(out).to include("[[:insert_before, Shoryuken::Middleware::Server::AutoDelete, " \
                               "Ferrolock::Shoryuken::Lock]]")
      end
    end
  end
end
