# frozen_string_literal: true

require "spec_helper"
require "json"
require "socket"
require "fileutils"
require "open3"
require "tmpdir"
require "rack"
require_relative "support/web_fixture"
require_relative "support/web_fixture_process"

# The "Locks" tab in a real browser: Sidekiq::Web + the tab served by WEBrick on loopback
# (spec/support/web_server.rb, a child process), locks held by another child process, each
# page opened in headless Chromium, screenshotted (tmp/screenshots/) and its rendered DOM checked.
module FerrolockTest
  CHROMIUM = %w[chromium chromium-browser google-chrome].map { |name| `command -v #{name} 2>/dev/null`.strip }
                                                        .find { |path| !path.empty? }
end

RSpec.describe "Locks tab in headless Chromium" do
  fixture = FerrolockTest::WebFixture
  let(:shots) { File.join(FerrolockTest::ROOT, "tmp", "screenshots") }

  before do
    skip "chromium is not installed (bin/setup installs Debian's chromium)" unless FerrolockTest::CHROMIUM
    @holder = FerrolockTest::WebFixtureProcess.new.start
    @port = FerrolockTest::RedisServer.free_port
    env = { "REDIS_URL" => FerrolockTest.redis_server.url,
            "RUBYLIB" => FerrolockTest::SidekiqVersion.rubylib(FerrolockTest::LIB) }
    # Outside Bundler: WEBrick is Debian's ruby-webrick, not a bundled gem.
    @server_in, @server_out, @server =
      Open3.popen2(FerrolockTest.unbundled_env(env), RbConfig.ruby, "-I", FerrolockTest::LIB,
                   File.join(FerrolockTest::ROOT, "spec/support/web_server.rb"), @port.to_s, pgroup: true)
    ready = @server_out.wait_readable(30) && @server_out.gets
    raise "the web server did not start within 30 s" unless ready == "listening\n"
  end

  after do
    stop_server
    @holder&.stop
  end

  def stop_server
    return unless @server

    Process.kill("TERM", -@server.pid) if @server.alive?
    Process.kill("KILL", -@server.pid) unless @server.join(10)
  rescue Errno::ESRCH
    nil # already gone
  end

  # The form's CSRF field (Sidekiq 8 has none: it checks the browser's Sec-Fetch-Site instead).
  def csrf_field
    FerrolockTest::SidekiqVersion.at_least?("8") ? [] : ['name="authenticity_token"']
  end

  # How Chromium serializes `text` inside an element (only &, < and > escaped).
  def as_text(text)
    text.gsub("&", "&amp;").gsub("<", "&lt;").gsub(">", "&gt;")
  end

  # Opens `path` in headless Chromium: saves a screenshot, returns the DOM after rendering.
  def browse(path, shot)
    FileUtils.mkdir_p(shots)
    file = File.join(shots, "#{shot}.png")
    FileUtils.rm_f(file)
    dom, err, status = Dir.mktmpdir("ferrolock-chromium-") do |profile|
      Open3.capture3(FerrolockTest::CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                     "--user-data-dir=#{profile}", "--window-size=1280,900", "--screenshot=#{file}", "--dump-dom",
                     "--enable-logging=stderr", "http://127.0.0.1:#{@port}#{path}")
    end
    expect(status).to be_success, err
    # The page's CSP (Sidekiq 8: styles and scripts with its nonce only) refused nothing of the tab's.
    expect(err).not_to include("Content Security Policy")
    expect(File.size(file)).to be > 10_000 # a rendered page, not an empty image
    dom
  end

  # How the ferrolock table of the page at `path` measures in a `width`-pixel window (see /__fit in
  # spec/support/web_server.rb).
  def fit(path, width)
    dom = browse("/__fit?#{Rack::Utils.build_query("path" => path, "width" => width)}", "fit")
    JSON.parse(dom[%r{<pre id="fit">(.*?)</pre>}m, 1].to_s.then { |text| text.empty? ? "null" : text })
  end

  it "fits the Locks and Uniques tables in Sidekiq's container: no column behind a scrollbar" do
    [1280, 2200].each do |width|
      %w[/locks /locks/uniques].each do |path|
        measured = fit(path, width)
        expect(measured).to be_a(Hash), "#{path} at #{width} px was not measured"
        expect(measured["table_right"]).to be <= measured["container_right"], "#{path} at #{width} px: #{measured}"
        expect(measured["box_scroll"]).to be <= measured["box_client"], "#{path} at #{width} px: #{measured}"
        expect(measured["page_scroll"]).to be <= measured["page_client"], "#{path} at #{width} px: #{measured}"
      end
    end
  end

  it "renders every page with live data, escaped, and the release confirmation with its CSRF token" do
    hostile = as_text(fixture::HOSTILE)
    dom = browse("/locks", "locks")
    # 2 mutexes, DualLock running + waiting, a while_executing job's run lock (the push-time
    # uniqueness locks are on their own page).
    expect(dom.scan('<tr class="ferrolock-lock">').size).to eq(5)
    expect(dom).to include(hostile, "invoice:42", "sync:account-7", "#{fixture::UNIQUE_RUNNING}:run", "Force release")
    expect(dom).not_to include(fixture::UNIQUE)
    holder = "#{Socket.gethostname} pid=#{@holder.pid} tid="
    expect(dom.scan(holder).size).to eq(5) # every row's holder: the fixture process
    expect(dom).to include("InvoiceJob jid=#{fixture::JOB[:jid]}")
    # The name was rendered as text: no script element came from it.
    expect(dom.scan(/<script\b/).size).to eq(dom.scan(%r{<script[^>]*src=[^>]*></script>}).size)
    # The README's screenshot (doc/web-locks.png, copied from tmp/screenshots): the tab's search box
    # leaves the hostile test row out.
    readme = browse("/locks?#{Rack::Utils.build_query("q" => "[isu]*")}", "readme_locks")
    expect(readme.scan('<tr class="ferrolock-lock">').size).to eq(4)
    expect(readme).not_to include(hostile)

    limiters = browse("/locks/limiters", "limiters")
    expect(limiters.scan('<tr class="ferrolock-limiter">').size).to eq(2)
    expect(limiters.scan(holder).size).to eq(2)
    # Limit, in use.
    expect(limiters).to match(%r{<td rowspan="2" class="ferrolock-limit">3</td>\s*<td rowspan="2">2</td>})
    tenants = browse("/locks/tenants?q=#{fixture::JOB_CLASS}", "tenants")
    expect(tenants).to include("slow: 3 / 2 in 3600.0s", as_text("<b>tiny</b>"))
    expect(browse("/locks/markers", "markers")).to include("m-processed", "m-running")

    uniques = browse("/locks/uniques", "uniques")
    expect(uniques.scan('<tr class="ferrolock-unique">').size).to eq(3)
    expect(uniques).to include(fixture::UNIQUE, fixture::UNIQUE_JID, "until_executed", as_text(fixture::UNIQUE_HOSTILE),
                               "while_executing", "SyncUniqueJob jid=#{fixture::RUNNING_JOB[:jid]}")
    expect(uniques.scan(">Force delete</a>").size).to eq(2) # the pushed digests; the running one has no push lock
    expect(uniques.scan(/<script\b/).size).to eq(uniques.scan(%r{<script[^>]*src=[^>]*></script>}).size)
    rates = browse("/locks/rate_limiters", "rate_limiters")
    expect(rates.scan('<tr class="ferrolock-rate-limiter">').size).to eq(4)
    sms = rates[%r{<tr class="ferrolock-rate-limiter">(?:(?!</tr>).)*fixture:sms</code>.*?</tr>}m]
    expect(sms).to include("<td>bucket</td>", %(<td class="ferrolock-rate">2 / 3600.0s</td>),
                           %(<td class="ferrolock-remaining">0</td>), %(<td class="ferrolock-reserved">1</td>))
    expect(rates).to include(as_text("fixture:<b>tiny</b>"))
    delete = browse("/locks/release?#{Rack::Utils.build_query("kind" => "unique_lock", "name" => fixture::UNIQUE,
                                                              "token" => fixture::UNIQUE_JID)}", "confirm_unique")
    expect(delete).to include("Force delete <code>#{fixture::UNIQUE}</code>?",
                              "Uniqueness lock of <code>ReportUniqueJob</code>",
                              "Yes, delete the lock held by jid #{fixture::UNIQUE_JID}", *csrf_field)

    confirm = browse("/locks/release?#{Rack::Utils.build_query("kind" => "dist_mutex", "name" => fixture::HOSTILE)}",
                     "confirm")
    expect(confirm).to include("Force release <code>#{hostile}</code>?", *csrf_field)
    # The holder named as the Locks page names it, not by its raw token.
    expect(confirm).to include("DistMutex held by #{holder}")
    # The Locks page's own Force release link of invoice:42 (its token in the query).
    link = dom[/href="([^"]*release\?[^"]*name=invoice%3A42[^"]*)"/, 1]
    expect(link).not_to be_nil
    one = browse(link.gsub("&amp;", "&"), "confirm_one")
    expect(one).to include("Yes, release this holder (#{holder}")

    # limits_concurrency: a Force release button per holder and per blocked job, each a link to its
    # confirmation page (a POST form with the CSRF token). Keys made by the scripts themselves.
    native = Ferrolock::Native::JobConcurrency.new(Ferrolock.client.native)
    key = "Lc<b>tiny</b>/k"
    policy = [1, 60.0, "block", 0]
    native.admit(key, "holder-job", "{}", true, policy, 0)
    %w[blocked-one blocked-two].each { |job_id| native.admit(key, job_id, "{}", false, policy, 0) }
    lc = browse("/locks/concurrency", "concurrency")
    expect(lc).to include(as_text(key), "holder-job", "blocked-one", "blocked-two")
    expect(lc.scan(">Force release</a>").size).to eq(3)
    link = lc[%r{href="([^"]*concurrency/release\?[^"]*job_id=blocked-two[^"]*)"}, 1]
    expect(link).not_to be_nil
    blocked = browse(link.gsub("&amp;", "&"), "confirm_concurrency")
    expect(blocked).to include("Force release job <code>blocked-two</code> of <code>#{as_text(key)}</code>?",
                               "is blocked on this key", "Yes, take it out of the line", *csrf_field)
  end
end
