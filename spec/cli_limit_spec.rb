# frozen_string_literal: true

require "spec_helper"
require "json"
require_relative "support/cli_runner"

# `ferrolock limit NAME N` / `--clear`, `ferrolock pause NAME`, `ferrolock resume NAME`, run as a real
# process: the limiter in this process obeys at its next attempt, and the listing shows the override.
RSpec.describe "ferrolock limit, pause, resume" do
  include FerrolockTest::CliRunner

  let(:limiter) { Ferrolock::ConcurrentLimiter.new("cli:live", 2, local_passes: 0) }

  def can_enter?
    limiter.within_limit(wait_timeout: 0) { true }
  rescue Ferrolock::OverLimit
    false
  end

  it "sets, pauses, resumes and clears, each shown by the listing" do
    out, err, code = run_ferrolock("limit", "cli:live", "1")
    expect([out, err, code]).to eq(["cli:live: limit 1 (set live)\n", "", 0])
    limiter.within_limit { expect(can_enter?).to be(false) }

    out, _, code = run_ferrolock("pause", "cli:live", "--json")
    expect(code).to eq(0)
    expect(JSON.parse(out)).to eq("name" => "cli:live", "limit" => 1, "paused" => true)
    expect(can_enter?).to be(false)
    out, = run_ferrolock("limiters", "cli:*")
    expect(out).to include("paused (1 (set live; code: 2))")

    out, = run_ferrolock("resume", "cli:live")
    expect(out).to eq("cli:live: limit 1 (set live)\n")
    expect(can_enter?).to be(true)

    out, = run_ferrolock("limit", "cli:live", "--clear")
    expect(out).to eq("cli:live: limit as the code passes it\n")
    limiter.within_limit { expect(can_enter?).to be(true) }
  end

  it "pauses and resumes a limits_concurrency key with --concurrency" do
    redis = FerrolockTest.redis_server.redis
    out, err, code = run_ferrolock("pause", "--concurrency", "CliJob/k")
    expect([out, err, code]).to eq(["CliJob/k: paused, limit as the code passes it\n", "", 0])
    expect(redis.hget("ferrolock:{concurrency:CliJob/k}:override", "paused")).to eq("1")
    out, = run_ferrolock("limit", "--concurrency", "CliJob/k", "3", "--json")
    expect(JSON.parse(out)).to eq("name" => "CliJob/k", "limit" => 3, "paused" => true)
    out, = run_ferrolock("resume", "--concurrency", "CliJob/k")
    expect(out).to eq("CliJob/k: limit 3 (set live)\n")
    run_ferrolock("limit", "--concurrency", "CliJob/k", "--clear")
    expect(redis.exists("ferrolock:{concurrency:CliJob/k}:override")).to eq(0)
  end

  it "pauses and resumes a Shoryuken queue's lock with --queue" do
    redis = FerrolockTest.redis_server.redis
    out, err, code = run_ferrolock("pause", "--queue", "cli-orders")
    expect([out, err, code]).to eq(["cli-orders: paused\n", "", 0])
    expect(redis.hget("ferrolock:{msg:cli-orders}:override", "paused")).to eq("1")
    expect(Ferrolock::Admin.new.paused_queues("cli-*").items.map(&:name)).to eq(["cli-orders"])
    out, = run_ferrolock("resume", "--queue", "cli-orders", "--json")
    expect(JSON.parse(out)).to eq("queue" => "cli-orders", "paused" => false)
    expect(redis.exists("ferrolock:{msg:cli-orders}:override")).to eq(0)
    _, err, code = run_ferrolock("pause", "--queue", "--concurrency", "cli-orders")
    expect([err, code]).to match([/not both/, 2])
  end

  it "shows a limits_concurrency key's override where `ferrolock concurrency` shows its limit" do
    native = Ferrolock::Native::JobConcurrency.new(Ferrolock.client.native)
    native.admit("CliJob/shown", "j1", "{}", false, [2, 30.0, "block", 0], 0) # holds a slot: the key is listed
    out, = run_ferrolock("concurrency", "CliJob/*")
    row = out.lines.find { |line| line.start_with?("CliJob/shown") }
    none = Ferrolock::Admin::Table::NONE
    expect(row.split[1]).to eq(none) # no job blocked yet, so no limit stored, and no override

    run_ferrolock("limit", "--concurrency", "CliJob/shown", "1")
    run_ferrolock("pause", "--concurrency", "CliJob/shown")
    out, = run_ferrolock("concurrency", "CliJob/*")
    row = out.lines.find { |line| line.start_with?("CliJob/shown") }
    expect(row).to include("paused (1 (set live; code: #{none}))")
    out, = run_ferrolock("concurrency", "CliJob/*", "--json")
    expect(JSON.parse(out).first).to include("key" => "CliJob/shown", "override" => { "limit" => 1, "paused" => true })

    run_ferrolock("limit", "--concurrency", "CliJob/shown", "--clear")
    out, = run_ferrolock("concurrency", "CliJob/*", "--json")
    expect(JSON.parse(out).first).to include("override" => nil)
  ensure
    native&.give_back("CliJob/shown", "j1", 1, 0)
  end

  it "refuses a missing or bad limit with exit 2" do
    _, err, code = run_ferrolock("limit", "cli:live")
    expect(code).to eq(2)
    expect(err).to include("give N")
    _, err, code = run_ferrolock("limit", "cli:live", "0")
    expect(code).to eq(2)
    expect(err).to include("limit must be positive")
    _, err, code = run_ferrolock("limit", "cli:live", "x")
    expect(code).to eq(2)
    expect(err).to include("N must be a positive integer")
  end
end
