# frozen_string_literal: true

require "spec_helper"
require "socket"
require "rack/test"
require "cgi"
require "digest"
require_relative "support/sidekiq_web"
require_relative "support/web_fixture"
require_relative "support/web_fixture_process"

FerrolockTest::SidekiqWeb.load!

# The job class the FairTenant page looks up (its fair_tenant_queues give the rules).
unless defined?(FerrolockWebHeavyJob)
  class FerrolockWebHeavyJob
    include Sidekiq::Worker
    sidekiq_options queue: "default", fair_tenant_queues: FerrolockTest::WebFixture::RULES
  end
end

# The "Locks" tab through Rack, on Sidekiq 6.4 Web and (bin/test rspec_sidekiq7) 7.3 Web, with
# locks held by a child process (spec/support/web_fixture.rb).
RSpec.describe "Sidekiq Web Locks tab" do
  include Rack::Test::Methods

  fixture = FerrolockTest::WebFixture
  let(:app) { FerrolockTest::SidekiqWeb.app }
  let(:admin) { Ferrolock::Admin.new }
  let(:escaped_hostile) { Rack::Utils.escape_html(fixture::HOSTILE) }

  # After the suite's `before` (which empties Redis).
  before { |example| @holder = FerrolockTest::WebFixtureProcess.new.start if example.metadata[:fixture] }
  after { @holder&.stop }

  def page(path)
    get(path)
    expect(last_response.status).to eq(200), "#{path}: #{last_response.status} #{last_response.body[0, 300]}"
    body = last_response.body
    # User data never reaches the page unescaped.
    expect(body).not_to include("<script>alert")
    expect(body).not_to include("<b>tiny</b>")
    body
  end

  # POSTs are protected by a CSRF token in the form on Sidekiq 6.4 and 7, and on 8 by the browser's
  # Sec-Fetch-Site header (same-origin only; its forms carry no token).
  def fetch_metadata? = FerrolockTest::SidekiqVersion.at_least?("8")

  # The form's CSRF token (nil on Sidekiq 8, which has none).
  def csrf_of(body)
    token = body[/name='authenticity_token' value='([^']+)'/, 1]
    expect(token.nil?).to eq(fetch_metadata?)
    token
  end

  # A POST as the tab's own form sends it (same origin, with the page's token).
  def form_post(path, form, csrf)
    return post(path, form, "HTTP_SEC_FETCH_SITE" => "same-origin") if fetch_metadata?

    post(path, form.merge("authenticity_token" => csrf))
  end

  # A POST from another site (no token, cross-site): refused.
  def forged_post(path, form)
    post(path, form, fetch_metadata? ? { "HTTP_SEC_FETCH_SITE" => "cross-site" } : {})
  end

  it "registers the Locks tab" do
    expect(Sidekiq::VERSION).to eq(FerrolockTest::SidekiqVersion.version.to_s)
    expect(Sidekiq::Web.tabs).to include("Locks" => "locks")
  end

  it "lists DistMutex and DualLock locks with tokens, fencing tokens, TTL, waiters and holders", :fixture do
    body = page("/locks")
    hostile = admin.show(fixture::HOSTILE).first
    expect(body).to include(escaped_hostile, "invoice:42", "sync:account-7", "DualLock running", "DualLock waiting")
    expect(body).to include(hostile.token, hostile.fencing_token.to_s)
    row = body[%r{<tr class="ferrolock-lock">(?:(?!</tr>).)*#{Regexp.escape(hostile.token)}.*?</tr>}m]
    expect(row).to include("<td>1</td>") # one waiter
    expect(row).to match(%r{<td>\d+\.\ds</td>}) # TTL left
    holder = "#{Socket.gethostname} pid=#{@holder.pid} tid="
    expect(row).to include(holder) # the child process holds it
    expect(row).to include(Ferrolock::Admin::Table.text(hostile.holder.since)) # Redis time, from the fence
    invoice = body[%r{<tr class="ferrolock-lock">(?:(?!</tr>).)*<code>invoice:42</code>.*?</tr>}m]
    expect(invoice).to include(holder, "InvoiceJob jid=#{fixture::JOB[:jid]}")
    running = body[%r{<tr class="ferrolock-lock">\s*<td>DualLock running</td>.*?</tr>}m]
    expect(running).to include(holder).and match(/\d\d:\d\d:\d\d\.\d{3} UTC \(asked\)/)
  end

  it "shows the Sidekiq job a lock is taken in: the class and jid of Sidekiq's own job context" do
    require "sidekiq/job_logger"
    config = FerrolockTest::SidekiqVersion.at_least?("7") ? Sidekiq.default_configuration : Sidekiq.logger
    logger = Sidekiq::JobLogger.new(config)
    seen = logger.prepare({ "class" => "ReportJob", "wrapped" => "Reports::Monthly", "jid" => "0123abcd" }) do
      Ferrolock::DistMutex.new("job:held").synchronize { admin.show("job:held").first.holder }
    end
    expect(seen.to_h).to include(job_class: "Reports::Monthly", jid: "0123abcd", pid: Process.pid,
                                 host: Socket.gethostname, since_clock: :redis)
    expect(seen.thread).to eq((Thread.current.object_id ^ Process.pid).to_s(36)) # Sidekiq's tid= in logs
    plain = Ferrolock::DistMutex.new("job:none").synchronize { admin.show("job:none").first.holder }
    expect(plain.to_h).not_to include(:job_class, :jid)
  end

  it "searches by name pattern and rejects braces", :fixture do
    body = page("/locks?q=invoice:*")
    expect(body).to include("invoice:42")
    expect(body).not_to include("sync:account-7", escaped_hostile)
    get("/locks?q=a%7Bb")
    expect(last_response.status).to eq(400)
    expect(last_response.body).to include("pattern must not contain")
    get("/locks?cursor=abc")
    expect(last_response.status).to eq(400)
  end

  it "answers 400, not 500, for a cursor beyond SCAN's 64 bits, on every listing" do
    %w[/locks /locks/limiters /locks/uniques /locks/rate_limiters /locks/markers /locks/tenants].each do |path|
      %w[99999999999999999999 18446744073709551616 1.99999999999999999999].each do |cursor|
        get("#{path}?cursor=#{cursor}")
        expect([last_response.status, last_response.body]).to match([400, include("cursor")]), "#{path} #{cursor}"
      end
      get("#{path}?cursor=18446744073709551615") # the largest cursor Redis takes
      expect(last_response.status).to eq(200), path
    end
  end

  it "forbids framing the tab's pages (the confirmation page above all), and only those" do
    %w[/locks /locks/limiters /locks/release?name=x /locks?q=a%7Bb].each do |path|
      get(path)
      expect(last_response.headers["X-Frame-Options"]).to eq("DENY"), path
    end
    get("/stats") # a page of Sidekiq's own (JSON: the 7.3 stand-in has no dashboard view)
    expect([last_response.status, last_response.headers["X-Frame-Options"]]).to eq([200, nil])
  end

  it "pages through many locks by SCAN cursor, every lock on some page" do
    names = Array.new(120) { |i| "bulk:#{i}" }
    mutexes = names.map { |name| Ferrolock::DistMutex.new(name).tap(&:lock) }
    seen = []
    path = "/locks?q=bulk:*"
    pages = 0
    loop do
      body = page(path)
      pages += 1
      seen.concat(body.scan(%r{<code>(bulk:\d+)</code>}).flatten)
      next_link = body[/href="([^"]+)"[^>]*>Next page/, 1] or break
      path = CGI.unescapeHTML(next_link).delete_prefix("http://example.org")
      raise "too many pages" if pages > 50
    end
    expect(pages).to be > 1
    expect(seen.uniq.sort).to eq(names.sort)
  ensure
    mutexes&.each(&:unlock)
  end

  it "links within the path Sidekiq Web is mounted at" do
    mounted = FerrolockTest::SidekiqWeb.app(mount: "/sidekiq")
    response = Rack::MockRequest.new(mounted).get("/sidekiq/locks")
    expect(response.status).to eq(200)
    escaped = ->(path) { Rack::Utils.escape_html(path) } # "/" is escaped too, valid in attributes
    expect(response.body).to include(%(href="#{escaped["/sidekiq/locks/limiters"]}"),
                                     %(action="#{escaped["/sidekiq/locks"]}"))
  end

  it "shows limiters with each slot", :fixture do
    body = page("/locks/limiters")
    limiter = admin.show(fixture::LIMITER).first
    expect([limiter.limit, limiter.in_use]).to eq([3, 2])
    expect(body).to include(fixture::LIMITER, *limiter.slots.map(&:token))
    # Name, limit, in use, waiting: the first row's cells.
    name = Regexp.escape(fixture::LIMITER)
    limit = %(<td rowspan="2" class="ferrolock-limit">3</td>)
    expect(body).to match(%r{#{name}</code></td>\s*#{limit}\s*<td rowspan="2">2</td>})
    expect(body.scan("#{Socket.gethostname} pid=#{@holder.pid} tid=").size).to eq(2) # each slot's holder
  end

  it "shows the web process's own limit beside a different stored one", :fixture do
    # The app (this process) now passes 7; the holder process stored 3.
    Ferrolock::ConcurrentLimiter.new(fixture::LIMITER, 7)
    expect(page("/locks/limiters")).to match(%r{<td rowspan="2" class="ferrolock-limit">7 \(stored 3\)</td>})
  ensure
    Ferrolock::ConcurrentLimiter.new(fixture::LIMITER, 3) # what the other examples expect this process to pass
  end

  it "shows FairTenant counts per rule and the queue each tenant goes to now", :fixture do
    body = page("/locks/tenants?q=FerrolockWebHeavyJob")
    acme = body[%r{<tr class="ferrolock-tenant">(?:(?!</tr>).)*<code>acme</code>.*?</tr>}m]
    tiny_name = Regexp.escape(Rack::Utils.escape_html("<b>tiny</b>"))
    tiny = body[%r{<tr class="ferrolock-tenant">(?:(?!</tr>).)*#{tiny_name}.*?</tr>}m]
    expect(acme).to include("slow: 3 / 2 in 3600.0s", "<code>slow</code>")
    expect(tiny).to include("slow: 1 / 2 in 3600.0s", "<code>default</code>")
    expect(page("/locks/tenants")).to include("<code>acme</code>")
  end

  it "shows Shoryuken message markers", :fixture do
    body = page("/locks/markers")
    expect(body).to include("m-processed", "processed", "m-running", "in progress")
    running = body[%r{<tr class="ferrolock-marker">(?:(?!</tr>).)*m-running.*?</tr>}m]
    expect(running).to include("#{Socket.gethostname} pid=#{@holder.pid} tid=")
  end

  it "force-releases through a confirmation page and a CSRF-protected POST; the waiter gets the lock", :fixture do
    before = admin.show(fixture::HOSTILE).first
    body = page("/locks/release?#{Rack::Utils.build_query("kind" => "dist_mutex", "name" => fixture::HOSTILE,
                                                          "token" => before.token)}")
    csrf = csrf_of(body)
    form = { "name" => fixture::HOSTILE, "kind" => "dist_mutex", "token" => before.token }

    forged_post("/locks/release", form)
    expect(last_response.status).to eq(403) # no CSRF token (8: cross-site): refused, nothing released
    expect(admin.show(fixture::HOSTILE).first.token).to eq(before.token)

    form_post("/locks/release", form, csrf)
    expect(last_response.status).to eq(302)
    after = admin.show(fixture::HOSTILE).first
    # Handed to the child's waiter (a new holder with a larger fencing token), not just deleted.
    expect(after.token).not_to be_nil
    expect(after.token).not_to eq(before.token)
    expect(after.fencing_token).to be > before.fencing_token
    expect(after.waiters).to eq(0)
    follow_redirect!
    expect(last_response.body).to include("Released 1 hold(s)", escaped_hostile)
  end

  it "force-releases one limiter slot", :fixture do
    slot = admin.show(fixture::LIMITER).first.slots.first
    csrf = csrf_of(page("/locks/release?name=#{fixture::LIMITER}"))
    form_post("/locks/release", { "name" => fixture::LIMITER, "kind" => "concurrent_limiter", "token" => slot.token },
              csrf)
    expect(last_response.status).to eq(302)
    expect(admin.show(fixture::LIMITER).first.slots.map(&:token)).not_to include(slot.token)
  end

  it "force-releases a limits_concurrency holder and a blocked job by CSRF-protected POSTs; the next job is enqueued" do
    require "active_job"
    previous = [ActiveJob::Base.logger, Ferrolock.config.logger]
    ActiveJob::Base.logger = Ferrolock.config.logger = Logger.new(nil)
    klass = stub_const("WebLcJob", Class.new(ActiveJob::Base) do
      include Ferrolock::ActiveJob::Concurrency
      self.queue_adapter = :test
      limits_concurrency to: 1, key: ->(_num) { "k" }, duration: 60
      def perform(_num) = nil
    end)
    holder, first, second = Array.new(3) { |n| klass.perform_later(n) }
    queued = -> { klass.queue_adapter.enqueued_jobs.map { |job| job["job_id"] } }
    expect(queued.call).to eq([holder.job_id])
    listing = page("/locks/concurrency?q=WebLcJob/*")
    # Each job's own button: a link to its confirmation page (the release is the POST there).
    hrefs = listing.scan(/href="([^"]*)"/).map { |(href)| CGI.unescapeHTML(href) }
    link = ->(job) { hrefs.find { |href| href.include?("concurrency/release?") && href.include?(job.job_id) } }
    confirm = page(link.call(holder))
    expect(confirm).to include("holds a slot of this key", "Yes, free its slot")
    form = { "key" => "WebLcJob/k", "job_id" => holder.job_id }

    forged_post("/locks/concurrency/release", form)
    expect(last_response.status).to eq(403) # no CSRF token (8: cross-site): refused, nothing released
    expect(admin.concurrency("WebLcJob/k").items.first.holders.map(&:token)).to eq([holder.job_id])

    form_post("/locks/concurrency/release", form, csrf_of(confirm))
    expect(last_response.status).to eq(302)
    # The slot went to the oldest blocked job, which was enqueued at once.
    expect(queued.call).to eq([holder.job_id, first.job_id])
    info = admin.concurrency("WebLcJob/k").items.first
    expect([info.holders.map(&:token), info.blocked_jobs]).to eq([[first.job_id], [second.job_id]])
    follow_redirect!
    expect(last_response.body).to include("its slot is free", holder.job_id)

    confirm = page(link.call(second))
    expect(confirm).to include("is blocked on this key", "Yes, take it out of the line")
    form_post("/locks/concurrency/release", { "key" => "WebLcJob/k", "job_id" => second.job_id }, csrf_of(confirm))
    expect(last_response.status).to eq(302)
    info = admin.concurrency("WebLcJob/k").items.first
    expect([info.holders.map(&:token), info.blocked]).to eq([[first.job_id], 0])
    expect(queued.call).to eq([holder.job_id, first.job_id]) # taken out, never run
  ensure
    ActiveJob::Base.logger, Ferrolock.config.logger = previous if previous
    Ferrolock::ActiveJob::Slots.reset!
  end

  describe "uniqueness and rate limiter pages" do
    def row(body, css, text)
      body[%r{<tr class="#{css}">(?:(?!</tr>).)*#{Regexp.escape(text)}.*?</tr>}m]
    end

    it "lists uniqueness digests: job class, lock type, jid, stage, TTL and the running job; escaped", :fixture do
      body = page("/locks/uniques")
      report = row(body, "ferrolock-unique", fixture::UNIQUE)
      expect(report).to include("<code>ReportUniqueJob</code>", "until_executed", fixture::UNIQUE_JID,
                                "ferrolock:{#{fixture::UNIQUE}}:lock", "pushed", "Force delete")
      expect(report).to match(%r{<td>\d+\.\ds</td>}) # TTL left
      running = row(body, "ferrolock-unique", fixture::UNIQUE_RUNNING)
      expect(running).to include("while_executing", "running", fixture::RUNNING_JOB[:jid],
                                 "#{Socket.gethostname} pid=#{@holder.pid} tid=", "SyncUniqueJob jid=")
      expect(running).not_to include("Force delete") # its run lock is released from the Locks page
      expect(body).to include(Rack::Utils.escape_html(fixture::UNIQUE_HOSTILE))
      expect(body).not_to include(%(<script>alert("u")))
      # The push-time lock is no DistMutex: not on the Locks page; the run-time lock is.
      locks = page("/locks")
      expect(locks).not_to include(fixture::UNIQUE)
      expect(locks).to include("#{fixture::UNIQUE_RUNNING}:run")
    end

    it "shows a job pushed through UniqueClientMiddleware with its class's lock type, and forgets it with the job" do
      stub_const("Reports::WebMonthlyJob", Class.new do
        include Sidekiq::Worker
        sidekiq_options lock: :until_executed, queue: "reports"
      end)
      job = { "class" => "Reports::WebMonthlyJob", "queue" => "reports", "args" => [7],
              "jid" => "f00dfeedf00dfeedf00dfeed" }
      middleware = Ferrolock::Sidekiq::Unique::ClientMiddleware.new
      expect(middleware.call(Reports::WebMonthlyJob, job, "reports") { job }).to eq(job)
      body = page("/locks/uniques?q=Reports::Web*")
      unique = row(body, "ferrolock-unique", "f00dfeedf00dfeedf00dfeed")
      expect(unique).to include("<code>Reports::WebMonthlyJob</code>", "<td>until_executed</td>", "pushed")
      digest = admin.uniques("Reports::Web*").items.map(&:digest)
      expect(digest).to eq([Ferrolock::Sidekiq::Unique::Digest.for(
        Ferrolock::Sidekiq::Unique::Settings.for(Reports::WebMonthlyJob, job), job
      )])
      Ferrolock::Sidekiq::Unique::Lock.new(digest.first).release(job["jid"]) # as the job's end does
      expect(page("/locks/uniques?q=Reports::Web*")).to include("No uniqueness lock held")
    end

    it "searches uniqueness digests by job class or digest and rejects braces", :fixture do
      body = page("/locks/uniques?q=ReportUnique*")
      expect(body).to include(fixture::UNIQUE)
      expect(body).not_to include(fixture::UNIQUE_RUNNING)
      expect(page("/locks/uniques?q=#{CGI.escape("unique:SyncUnique*")}")).to include(fixture::UNIQUE_RUNNING)
      expect(page("/locks/uniques?q=NoSuchJob")).to include("No uniqueness lock held matching NoSuchJob")
      get("/locks/uniques?q=a%7Bb")
      expect([last_response.status, last_response.body]).to match([400, include("pattern must not contain")])
    end

    it "pages through many digests by SCAN cursor, every digest on some page" do
      digests = Array.new(150) { |i| "unique:WebPagedJob:#{Digest::SHA256.hexdigest("web #{i}")}" }
      digests.each_with_index { |d, i| Ferrolock::Sidekiq::Unique::Lock.new(d).take("jid-#{i}", 600) }
      seen = []
      path = "/locks/uniques?q=WebPagedJob"
      pages = 0
      loop do
        body = page(path)
        pages += 1
        seen.concat(body.scan(%r{<code title="[^"]*">(unique:WebPagedJob:\h+)</code>}).flatten)
        next_link = body[/href="([^"]+)"[^>]*>Next page/, 1] or break
        path = CGI.unescapeHTML(next_link).delete_prefix("http://example.org")
        raise "too many pages" if pages > 50
      end
      expect(pages).to be > 1
      expect(seen.uniq).to match_array(digests)
    end

    it "force-deletes a digest through the confirmation page and the CSRF-protected POST", :fixture do
      query = Rack::Utils.build_query("kind" => "unique_lock", "name" => fixture::UNIQUE,
                                      "token" => fixture::UNIQUE_JID)
      body = page("/locks/release?#{query}")
      expect(body).to include("Uniqueness lock of <code>ReportUniqueJob</code> held by jid", fixture::UNIQUE_JID,
                              "a duplicate of the job pushed from now on is enqueued")
      csrf = csrf_of(body)
      form = { "name" => fixture::UNIQUE, "kind" => "unique_lock", "token" => fixture::UNIQUE_JID }
      lock = Ferrolock::Sidekiq::Unique::Lock.new(fixture::UNIQUE)

      forged_post("/locks/release", form)
      expect(last_response.status).to eq(403) # no CSRF token (8: cross-site): refused, nothing deleted
      expect(lock.holder).to eq(fixture::UNIQUE_JID)
      form_post("/locks/release", form.merge("token" => "another-jid"), csrf)
      expect(last_response.status).to eq(302) # a jid that does not hold it: nothing deleted
      expect(lock.holder).to eq(fixture::UNIQUE_JID)

      # A fresh form, as the browser loads it again.
      form_post("/locks/release", form, csrf_of(page("/locks/release?#{query}")))
      expect(last_response.status).to eq(302)
      expect(last_response.location).to include("/locks/uniques?released=1")
      expect(lock.holder).to be_nil
      expect(lock.take("jid-duplicate", 60)).to be_nil # a duplicate push goes through now
      follow_redirect!
      expect(last_response.body).to include("Released 1 hold(s)", fixture::UNIQUE)
    end

    it "shows rate limiters: kind, limit / interval, remaining now, reset in, reservations; escaped", :fixture do
      body = page("/locks/rate_limiters")
      sms = row(body, "ferrolock-rate-limiter", "fixture:sms")
      slash = Rack::Utils.escape_html("/") # Sidekiq's h escapes it
      expect(sms).to include("<td>bucket</td>", %(<td class="ferrolock-rate">2 #{slash} 3600.0s</td>),
                             %(<td class="ferrolock-remaining">0</td>), %(<td class="ferrolock-reserved">1</td>))
      expect(sms).to match(%r{<td>\d+\.\ds</td>}) # reset in
      partner = row(body, "ferrolock-rate-limiter", "fixture:partner-api")
      expect(partner).to include("<td>window</td>", "3 #{slash} 2592000.0s", %(<td class="ferrolock-remaining">1</td>))
      search = row(body, "ferrolock-rate-limiter", "fixture:search")
      expect(search).to include("sliding window", %(<td class="ferrolock-remaining">4</td>))
      points = row(body, "ferrolock-rate-limiter", Rack::Utils.escape_html("fixture:<b>tiny</b>"))
      expect(points).to include("<td>points</td>", "10 #{slash} 3600.0s", %(<td class="ferrolock-remaining">6</td>))
      expect(page("/locks/rate_limiters?q=fixture:s*").scan('<tr class="ferrolock-rate-limiter">').size).to eq(2)
    end
  end
end
