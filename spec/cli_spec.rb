# frozen_string_literal: true

require "spec_helper"
require "socket"
require "json"
require "open3"
require "pathname"
require "securerandom"
require "tmpdir"
require "ferrolock/admin/cli"
require_relative "support/web_fixture"
require_relative "support/web_fixture_process"
require_relative "support/cli_runner"

# The `ferrolock` executable, run as a real process against locks held by another process.
RSpec.describe "ferrolock command" do
  fixture = FerrolockTest::WebFixture

  include FerrolockTest::CliRunner

  define_method(:ferrolock_with_env) do |extra_env, *args, url: FerrolockTest.redis_server.url|
    run_ferrolock(*args, env: extra_env, url: url)
  end

  define_method(:ferrolock) do |*args, url: FerrolockTest.redis_server.url|
    ferrolock_with_env({}, *args, url: url)
  end

  let(:admin) { Ferrolock::Admin.new }

  context "with locks held by another process" do
    before { @holder = FerrolockTest::WebFixtureProcess.new.start }
    after { @holder.stop }

    it "lists locks as a table and as JSON, filtered by pattern" do
      out, _, code = ferrolock("locks")
      expect(code).to eq(0)
      expect(out.lines.first).to match(/\AKIND +NAME +TOKEN +FENCE +TTL +WAITERS +HOLDER +SINCE/)
      expect(out).to include("dist_mutex", fixture::HOSTILE, "dual_lock:exec", "dual_lock:wait", fixture::DUAL)

      out, _, code = ferrolock("locks", "invoice:*", "--json")
      expect(code).to eq(0)
      locks = JSON.parse(out)
      expect(locks.map { |l| l["name"] }).to eq([fixture::MUTEX])
      expect(locks.first).to include("kind" => "dist_mutex", "token" => admin.show(fixture::MUTEX).first.token,
                                     "waiters" => 0)
      expect(locks.first["holder"]).to include("host" => Socket.gethostname, "pid" => @holder.pid,
                                               "job_class" => "InvoiceJob", "jid" => fixture::JOB[:jid],
                                               "since_clock" => "redis")
      expect(locks.first["fencing_token"]).to be_a(Integer)
    end

    it "shows limiters, tenants (with the class's rules) and markers" do
      out, _, code = ferrolock("limiters")
      expect(code).to eq(0)
      expect(out).to match(/^#{Regexp.escape(fixture::LIMITER)} +3 +2 +0 /)
      out, _, code = ferrolock("limiters", "--json")
      expect(code).to eq(0)
      expect(JSON.parse(out)).to match([include("name" => fixture::LIMITER, "limit" => 3, "local_limit" => nil,
                                                "in_use" => 2)])
      # With the app's code loaded, its own (different) limit shows beside the stored one.
      app = %w[--require spec/fixtures/partner_limiter.rb]
      out, _, code = ferrolock("limiters", *app)
      expect([code, out]).to match([0, match(/^#{Regexp.escape(fixture::LIMITER)} +7 \(stored 3\) +2 +0 /)])
      out, _, code = ferrolock("show", "--json", *app, fixture::LIMITER)
      expect([code, JSON.parse(out)]).to match([0, [include("limit" => 3, "local_limit" => 7)]])

      out, _, code = ferrolock("tenants", "--require", "spec/fixtures/fair_tenant_job.rb", fixture::JOB_CLASS, "--json")
      expect(code).to eq(0)
      acme = JSON.parse(out).find { |t| t["tenant"] == "acme" }
      expect(acme).to include("queue" => "slow", "mode" => "exact")
      expect(acme["rules"]).to eq([{ "queue" => "slow", "threshold" => 2, "per" => 3600.0, "counted" => 3 }])

      out, _, code = ferrolock("markers")
      expect(code).to eq(0)
      expect(out).to match(/^orders +m-processed +processed/).and match(/^orders +m-running +in_progress +\h{32}/)
    end

    it "shows one name, and releases it only with --force, handing it to the waiter" do
      before = admin.show(fixture::HOSTILE).first
      out, _, code = ferrolock("show", fixture::HOSTILE)
      expect([code, out]).to match([0, include(before.token[0, 32], "pid=#{@holder.pid}")])

      _, err, code = ferrolock("release", fixture::HOSTILE)
      expect([code, err]).to match([2, include("--force")])
      expect(admin.show(fixture::HOSTILE).first.token).to eq(before.token)

      out, _, code = ferrolock("release", fixture::HOSTILE, "--force")
      expect([code, out]).to match([0, include("dist_mutex", before.token)])
      after = admin.show(fixture::HOSTILE).first
      expect(after.token).not_to eq(before.token) # the child's waiter holds it now
      expect(after.fencing_token).to be > before.fencing_token
    end

    it "lists uniqueness digests and rate limiters, with the app's code for lock types and limits" do
      out, _, code = ferrolock("uniques")
      expect(code).to eq(0)
      expect(out.lines.first).to match(/\ADIGEST +CLASS +LOCK +JID +STAGE +TTL +RUN_HOLDER/)
      report = Regexp.escape(fixture::UNIQUE)
      running = Regexp.escape(fixture::UNIQUE_RUNNING)
      expect(out).to match(/^#{report} +ReportUniqueJob +— +#{fixture::UNIQUE_JID} +pushed +\d+\.\ds/)
      expect(out).to match(/^#{running} +SyncUniqueJob +while_executing +#{fixture::RUNNING_JOB[:jid]} +running /)
      expect(out).to include("pid=#{@holder.pid}")
      app = %w[--require spec/support/web_fixture.rb] # defines the job class and the rate limiters
      out, _, code = ferrolock("uniques", *app, "ReportUnique*", "--json")
      expect(code).to eq(0)
      expect(JSON.parse(out)).to match([include("digest" => fixture::UNIQUE, "job_class" => "ReportUniqueJob",
                                                "lock_type" => "until_executed", "jid" => fixture::UNIQUE_JID,
                                                "stages" => ["pushed"], "ttl" => be_between(1, 3600))])

      # Redis keeps no limit: without the app's limiters, what the keys tell.
      out, _, code = ferrolock("rate-limiters")
      expect(code).to eq(0)
      expect(out.lines.first).to match(/\ANAME +KIND +LIMIT +REMAINING +RESET_IN +RESERVED/)
      expect(out).to match(/^fixture:sms +bucket +— +— +\d+\.\ds +—$/)
      expect(out).to match(/^fixture:search +sliding_window +— +— +\d+\.\ds +0$/)
      out, _, code = ferrolock("rate-limiters", *app)
      expect(code).to eq(0)
      expect(out).to match(%r{^fixture:sms +bucket +2 / 3600\.0s +0 +\d+\.\ds +1$})
      expect(out).to match(%r{^fixture:partner-api +window +3 / 2592000\.0s +1 +})
      out, _, code = ferrolock("rate-limiters", *app, "fixture:s*", "--json")
      expect(code).to eq(0)
      expect(JSON.parse(out).map { |r| r.values_at("name", "kind", "limit", "remaining", "reserved", "known") })
        .to contain_exactly(["fixture:sms", "bucket", 2, 0, 1, true],
                            ["fixture:search", "sliding_window", 5, 4, 0, true])
    end

    it "shows a digest, and force-deletes it only with --force" do
      out, _, code = ferrolock("show", fixture::UNIQUE)
      expect([code, out]).to match([0, include(fixture::UNIQUE_JID, "pushed")])
      _, err, code = ferrolock("release", fixture::UNIQUE)
      expect([code, err]).to match([2, include("--force")])
      expect(Ferrolock::Sidekiq::Unique::Lock.new(fixture::UNIQUE).holder).to eq(fixture::UNIQUE_JID)

      out, _, code = ferrolock("release", fixture::UNIQUE, "--force", "--json")
      expect([code, JSON.parse(out)]).to eq([0, [{ "kind" => "unique_lock", "name" => fixture::UNIQUE,
                                                   "token" => fixture::UNIQUE_JID }]])
      expect(Ferrolock::Sidekiq::Unique::Lock.new(fixture::UNIQUE).holder).to be_nil
      expect(ferrolock("show", fixture::UNIQUE)).to match(["", include("nothing holds"), 1])
      expect(ferrolock("release", fixture::UNIQUE, "--force")).to match(["", include("nothing holds"), 1])
      # A while_executing job holds only its run-time lock: released under its own name.
      _, err, code = ferrolock("release", fixture::UNIQUE_RUNNING, "--force")
      expect([code, err]).to match([1, include("released as #{fixture::UNIQUE_RUNNING}:run")])
      out, _, code = ferrolock("release", "#{fixture::UNIQUE_RUNNING}:run", "--force")
      expect([code, out]).to match([0, include("dist_mutex")])
    end

    it "lists nothing in another namespace" do
      out, _, code = ferrolock("--namespace", "elsewhere", "locks", "--json")
      expect([code, out]).to eq([0, "[]\n"]) # not "[", a blank line, "]"
    end
  end

  it "escapes control characters of names in tables" do
    mutex = Ferrolock::DistMutex.new("evil\nname\e[31m")
    mutex.lock
    out, _, code = ferrolock("locks")
    expect(code).to eq(0)
    expect(out).to include("evil\\x0Aname\\x1B[31m")
    expect(out).not_to include("\e")
  ensure
    mutex&.unlock
  end

  it "exits 1 when nothing holds the name" do
    expect(ferrolock("show", "nobody")).to match(["", include("nothing holds nobody"), 1])
    expect(ferrolock("release", "nobody", "--force")).to match(["", include("nothing holds nobody"), 1])
  end

  it "exits 2 on usage errors, 0 with --help for every command" do
    expect(ferrolock("frobnicate")[1..]).to match([include("unknown command"), 2])
    expect(ferrolock[1..]).to match([include("no command given"), 2])
    expect(ferrolock("show")[1..]).to match([include("show: expected NAME"), 2])
    expect(ferrolock("locks", "--limit", "0")[1..]).to match([include("--limit must be positive"), 2])
    expect(ferrolock("limiters", "--require", "spec/fixtures/no_such_file.rb")[1..])
      .to match([include("--require spec/fixtures/no_such_file.rb: cannot load such file"), 2])
    expect(ferrolock("locks", "a{b")[1..]).to match([include("pattern must not contain"), 2])
    expect(ferrolock("uniques", "a}b")[1..]).to match([include("pattern must not contain"), 2])
    expect(ferrolock("rate-limiters", "a", "b")[1..]).to match([include("rate-limiters: expected [PATTERN]"), 2])
    expect(ferrolock("--bogus")[2]).to eq(2)
    Ferrolock::Admin::Cli::COMMANDS.each do |command, (usage, _)|
      out, _, code = ferrolock(command, "--help")
      expect([code, out]).to match([0, include("Usage: ferrolock #{usage}")])
    end
    out, _, code = ferrolock("--help")
    expect([code, out]).to match([0, include("Exit codes: 0 ok, 1 not found, 2 usage, 3 Redis unreachable")])
    expect(out).to include("uniques [PATTERN]", "rate-limiters [PATTERN]")
  end

  it "exits 3 when Redis is unreachable or refuses, never printing the password" do
    closed = "redis://:s3cret-pw@127.0.0.1:#{FerrolockTest::RedisServer.free_port}/0"
    out, err, code = ferrolock("locks", url: closed)
    expect([code, out]).to eq([3, ""])
    expect(err).to include("unreachable", "***").and(satisfy { |e| !e.include?("s3cret-pw") })

    # The test server has no password: AUTH is refused, and the message must not echo it either.
    wrong = FerrolockTest.redis_server.url.sub("redis://", "redis://:s3cret-pw@")
    _, err, code = ferrolock("--url", wrong, "locks", url: closed)
    expect(code).to eq(3)
    expect(err).not_to include("s3cret-pw")
  end

  it "never reads an operand as an option: -- ends options, and --require never takes FILE in the same word" do
    Dir.mktmpdir("ferrolock-cli-") do |dir|
      marker = File.join(dir, "ran")
      script = File.join(dir, "x.rb")
      File.write(script, "File.write(#{marker.inspect}, 'ran')\n")
      relative = Pathname(script).relative_path_from(Pathname(FerrolockTest::ROOT)).to_s
      operand = "-r#{relative}" # what `ferrolock limiters "$P"` gets with P=-r./x.rb
      expect(ferrolock("limiters", operand)[1..]).to match([include("--require FILE as two words"), 2])
      expect(ferrolock("limiters", "--require=#{relative}")[2]).to eq(2)
      expect(ferrolock("limiters", "--req=#{relative}")[2]).to eq(2)
      out, _, code = ferrolock("limiters", "--json", "--", operand)
      expect([code, JSON.parse(out)]).to eq([0, []]) # a pattern, matching nothing
      # After the first operand, only --json, --force and --help are still flags.
      expect(ferrolock("locks", "pat", "-r", relative)[1..]).to match([include("expected [PATTERN]"), 2])
      expect(ferrolock("locks", "pat", "--json")[2]).to eq(0)
      expect(File.exist?(marker)).to be(false)
    end
  end

  it "takes the password from --password-file or FERROLOCK_REDIS_PASSWORD, never from the command line" do
    server = FerrolockTest::RedisServer.new(unixsocket: true).start
    password = "pw-#{SecureRandom.hex(6)} @/:"
    server.redis.call("CONFIG", "SET", "requirepass", password)
    tcp = "redis://127.0.0.1:#{server.port}/0"
    socket = "unix://#{server.socket_path}"
    Dir.mktmpdir("ferrolock-cli-") do |dir|
      file = File.join(dir, "password")
      File.write(file, "#{password}\n")
      [tcp, socket].each do |url|
        expect(ferrolock("--password-file", file, "locks", url: url)[2]).to eq(0), url
        expect(ferrolock("--url", url, "--password-file", file, "locks")[2]).to eq(0), url
        out, err, code = ferrolock_with_env({ "FERROLOCK_REDIS_PASSWORD" => password }, "locks", url: url)
        expect(code).to eq(0), "#{url}: #{err}"
        expect(out + err).not_to include(password)
      end
      File.write(file, "wrong-#{password}")
      out, err, code = ferrolock("--password-file", file, "locks", url: tcp)
      expect(code).to eq(3)
      expect(out + err).to include("***").and(satisfy { |text| !text.include?(password) })
      _, err, code = ferrolock("--password-file", File.join(dir, "missing"), "locks", url: tcp)
      expect([code, err]).to match([2, include("--password-file")])
    end
  ensure
    server&.destroy
  end

  it "runs the README's shell examples" do
    readme = File.read(File.join(FerrolockTest::ROOT, "README.md"))
    section = readme[/^### The `ferrolock` command.*?(?=^##)/m] or raise "README has no `ferrolock` command section"
    commands = section.scan(/```sh\n(.*?)```/m).flatten.flat_map(&:lines).map(&:strip).grep(/\Aferrolock /)
    expect(commands).not_to be_empty
    Ferrolock.configure { |c| c.history = true } # for `ferrolock stats`
    report = Ferrolock::DistMutex.new("report:42")
    report.lock
    Ferrolock::History.flush!
    commands.each do |line|
      args = line.sub(/\s+#.*\z/, "").split.drop(1).map { |arg| arg.delete("'") }
      _, err, code = ferrolock(*args)
      expect([line, code]).to eq([line, 0]), err
    end
  ensure
    Ferrolock.configure { |c| c.history = false }
    # `release --force` took it: unlock now so the lease watchdog does not find it lost (a
    # lock_lost event) seconds later, inside another spec.
    begin
      report&.unlock
    rescue Ferrolock::Error, ThreadError
      nil
    end
  end
end
