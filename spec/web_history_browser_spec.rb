# frozen_string_literal: true

require "spec_helper"
require "fileutils"
require "open3"
require "tmpdir"

# The History page in headless Chromium against a live workload (spec/support/history_workload.rb,
# its own process, history on): on Sidekiq 8 the page's canvases are drawn by Sidekiq's Chart.js
# with non-zero series (history.js writes data-points and data-painted on each once drawn), without
# a Content Security Policy refusal; before Sidekiq 8, tables. Screenshots in tmp/screenshots/.
RSpec.describe "History page in headless Chromium", time_limit: 120 do
  let(:shots) { File.join(FerrolockTest::ROOT, "tmp", "screenshots") }
  let(:chromium) do
    paths = %w[chromium chromium-browser google-chrome].map { |name| `command -v #{name} 2>/dev/null`.strip }
    paths.find { |path| !path.empty? }
  end

  # A child outside Bundler (WEBrick is Debian's), with Sidekiq's version of this run first.
  def spawn_child(script, *args, env: {})
    env = env.merge("REDIS_URL" => FerrolockTest.redis_server.url,
                    "RUBYLIB" => FerrolockTest::SidekiqVersion.rubylib(FerrolockTest::LIB))
    Open3.popen2(FerrolockTest.unbundled_env(env), RbConfig.ruby, "-I", FerrolockTest::LIB, script, *args, pgroup: true)
  end

  def started(out, word, what)
    line = out.wait_readable(60) && out.gets
    raise "#{what} did not start within 60 s (#{line.inspect})" unless line == "#{word}\n"
  end

  before do
    skip "chromium is not installed (bin/setup installs Debian's chromium)" unless chromium
    @workload_in, workload_out, @workload = spawn_child(File.join(__dir__, "support/history_workload.rb"),
                                                        env: { "FERROLOCK_HISTORY" => "1" })
    started(workload_out, "ready", "the workload")
    @port = FerrolockTest::RedisServer.free_port
    _, server_out, @server = spawn_child(File.join(__dir__, "support/web_server.rb"), @port.to_s)
    started(server_out, "listening", "the web server")
  end

  after do
    [@server, @workload].compact.each do |child|
      Process.kill("TERM", -child.pid) if child.alive?
      Process.kill("KILL", -child.pid) unless child.join(10)
    rescue Errno::ESRCH
      nil
    end
  end

  def browse(path, shot)
    FileUtils.mkdir_p(shots)
    file = File.join(shots, "#{shot}.png")
    dom, err, status = Dir.mktmpdir("ferrolock-chromium-") do |profile|
      Open3.capture3(chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                     "--user-data-dir=#{profile}", "--window-size=1280,1000", "--screenshot=#{file}", "--dump-dom",
                     "--enable-logging=stderr", "http://127.0.0.1:#{@port}#{path}")
    end
    expect(status).to be_success, err
    expect(err).not_to include("Content Security Policy")
    expect(File.size(file)).to be > 10_000
    dom
  end

  # [[points, painted pixels], ...] of the page's drawn canvases.
  def canvases(dom)
    dom.scan(/<canvas class="ferrolock-chart"[^>]*>/).map do |tag|
      [tag[/data-points="(\d+)"/, 1].to_i, tag[/data-painted="(\d+)"/, 1].to_i]
    end
  end

  it "draws the busiest names' and one name's charts from the live workload" do
    kind = browse("/locks/history?kind=dist_mutex", "history_kind")
    expect(kind).to include("erp-sync")
    one = browse("/locks/history?name=erp-sync", "history_name")
    limiter = browse("/locks/history?kind=concurrent_limiter&since=8h", "history_limiter")
    expect(limiter).to include("over_limit")
    unless FerrolockTest::SidekiqVersion.at_least?("8")
      expect(canvases(one)).to eq([]) # tables only: no chart library before Sidekiq 8
      next
    end
    expect(canvases(kind).size).to eq(1)
    expect(canvases(one).size).to eq(2) # events, and waits p50/p99
    (canvases(kind) + canvases(one) + canvases(limiter)).each do |points, painted|
      expect(points).to be > 0
      expect(painted).to be > 1000
    end
  end
end
