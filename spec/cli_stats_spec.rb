# frozen_string_literal: true

require "json"
require_relative "support/cli_runner"

# `ferrolock stats NAME`, run as a real process, reading the history this process flushed.
RSpec.describe "ferrolock stats", time_limit: 60 do
  include FerrolockTest::CliRunner

  # (spec_helper empties Redis before each example.)
  before do
    Ferrolock.configure { |c| c.history = true }
    mutex = Ferrolock::DistMutex.new("stats:report")
    5.times { mutex.synchronize { nil } }
    limiter = Ferrolock::ConcurrentLimiter.new("stats:report", 1, wait_timeout: 0)
    limiter.within_limit { limiter.within_limit { nil } rescue Ferrolock::OverLimit } # rubocop:disable Style/RescueModifier
    Ferrolock::History.flush!
  ensure
    Ferrolock.configure { |c| c.history = false }
  end

  it "prints each kind's event totals and its waits' percentiles" do
    out, err, code = run_ferrolock("stats", "stats:report", "--since", "1h")
    expect([err, code]).to eq(["", 0])
    lines = out.lines.map(&:split)
    expect(lines.first).to eq(%w[KIND EVENT TOTAL BUSIEST_MINUTE])
    expect(lines).to include(%w[concurrent_limiter acquired 1 1], %w[concurrent_limiter over_limit 1 1],
                             %w[concurrent_limiter released 1 1], %w[dist_mutex acquired 5 5],
                             %w[dist_mutex released 5 5])
    waits, holds = out.split(/^(?=KIND +HOLDS)/)
    expect(waits).to match(/^KIND +WAITS +P50 +P95 +P99$/).and match(/^dist_mutex +5 +\d+ ms +\d+ ms +\d+ ms$/)
    expect(holds).to match(/\AKIND +HOLDS +P50 +P95 +P99$/).and match(/^dist_mutex +5 +\d+ ms +\d+ ms +\d+ ms$/)
    expect(holds).to match(/^concurrent_limiter +1 +\d+ ms +\d+ ms +\d+ ms$/)
  end

  it "prints JSON with --json, the options before or after NAME, hours beyond 8 hours back" do
    out, _, code = run_ferrolock("stats", "--json", "--since", "24h", "stats:report")
    expect(code).to eq(0)
    stats = JSON.parse(out)
    expect(stats).to include("name" => "stats:report", "since" => 86_400, "step" => 3600)
    expect(stats["primitives"]["dist_mutex"]["counts"]).to eq("acquired" => 5, "released" => 5)
    expect(stats["primitives"]["dist_mutex"]["waits"]["samples"]).to eq(5)
    expect(stats["primitives"]["dist_mutex"]["holds"]).to include("samples" => 5, "p50" => a_kind_of(Float))
    expect(stats["primitives"]["dist_mutex"]["series"].size).to be_between(24, 25)
  end

  it "exits 1 for a name without history and 2 for a bad --since" do
    _, err, code = run_ferrolock("stats", "stats:nothing")
    expect(code).to eq(1)
    expect(err).to include("no history of stats:nothing in namespace \"ferrolock\" in the last 1h")
    _, err, code = run_ferrolock("stats", "stats:report", "--since", "4d")
    expect(code).to eq(2)
    expect(err).to include("since must be between 1 second and 72 hours")
  end
end
