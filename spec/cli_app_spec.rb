# frozen_string_literal: true

require "spec_helper"
require "json"
require "tmpdir"
require "ferrolock/admin/cli"
require_relative "support/cli_runner"

# The `ferrolock` command finding an app's keys when the app sets its own namespace in code
# (spec/fixtures/namespaced_app.rb: c.namespace = "myapp"): with --require FILE, with
# FERROLOCK_NAMESPACE, or by naming the namespaces it found when it finds nothing.
RSpec.describe "ferrolock command and the app's namespace", time_limit: 180 do
  include FerrolockTest::CliRunner

  app_file = "spec/fixtures/namespaced_app.rb" # not loaded here: it would configure this process
  mutex = "report:42"     # mutex
  limiter = "partner-api" # limiter
  holder_script = File.join(FerrolockTest::ROOT, "spec/support/namespaced_app_holder.rb")
  rails_environment = File.join(FerrolockTest::ROOT, "spec/fixtures/rails_app/config/environment.rb")

  # The app's DistMutex and a slot of its limiter, held by another process in namespace "myapp".
  before do
    env = { "REDIS_URL" => FerrolockTest.redis_server.url, "FERROLOCK_NAMESPACE" => nil }
    @stdin, @stdout, @holder = Open3.popen2(env, RbConfig.ruby, "-I", FerrolockTest::LIB, holder_script,
                                            pgroup: true)
    ready = @stdout.wait_readable(30) && @stdout.gets
    raise "the holder did not get ready within 30 s" unless ready == "ready\n"
  end

  after do
    @stdin.close
    Process.kill("KILL", -@holder.pid) unless @holder.join(10)
    @holder.join
  end

  define_method(:expect_app_locks) do |*options, **run|
    out, err, code = run_ferrolock("locks", *options, **run)
    expect([code, err]).to eq([0, ""])
    expect(out).to match(/^dist_mutex +#{Regexp.escape(mutex)} .*pid=#{@holder.pid}/)
    out, _, code = run_ferrolock("limiters", *options, "--json", **run)
    expect([code, JSON.parse(out)]).to match([0, [include("name" => limiter, "in_use" => 1)]])
    out, _, code = run_ferrolock("show", *options, mutex, **run)
    expect([code, out]).to match([0, include("pid=#{@holder.pid}")])
  end

  it "lists the app's locks and limiter slots with only --require FILE, on every command" do
    expect_app_locks("--require", app_file)
    Ferrolock::Admin::Cli::COMMANDS.each_key do |command|
      out, _, code = run_ferrolock(command, "--help")
      expect([code, out]).to match([0, include("--require FILE")]), command
    end
    out, err, code = run_ferrolock("markers", "-r", app_file, "--json")
    expect([code, out, err]).to eq([0, "[]\n", ""]) # none in "myapp", and nothing to hint at
  end

  it "lists the app's locks and limiter slots with only FERROLOCK_NAMESPACE" do
    expect_app_locks(env: { "FERROLOCK_NAMESPACE" => "myapp" })
    # --namespace still wins over both.
    out, _, code = run_ferrolock("--namespace", "ferrolock", "locks", "--require", app_file, "--json")
    expect([code, out]).to eq([0, "[]\n"])
  end

  it "names the namespaces holding ferrolock's keys when it finds nothing in its own" do
    out, err, code = run_ferrolock("locks")
    expect([code, out.lines.size]).to eq([0, 1]) # the header only
    expect(err).to include('no locks in namespace "ferrolock"; keys of ferrolock were found under namespace "myapp"',
                           "--namespace myapp", "FERROLOCK_NAMESPACE")
    out, err, code = run_ferrolock("limiters", "--json")
    expect([code, out]).to eq([0, "[]\n"])
    expect(err).to include('namespace "myapp"')
    _, err, code = run_ferrolock("show", mutex)
    found = %(nothing holds #{mutex} in namespace "ferrolock"; keys of ferrolock were found under namespace "myapp")
    expect([code, err]).to match([1, include(found)])
    _, err, code = run_ferrolock("release", "--force", mutex)
    expect([code, err]).to match([1, include('under namespace "myapp"')])
  end

  it "loads a Rails app's environment from another directory, from the app's root" do
    _out, err, status = Open3.capture3(RbConfig.ruby, "-e", 'require "rails"; require "active_job/railtie"')
    skip "railties (Debian's ruby-railties 6.1) cannot be loaded: #{err.lines.first}" unless status.success?

    Dir.mktmpdir("ferrolock-cli-") do |dir|
      # A second file, given relative to where the command runs: loaded after the app, it sees the app's root.
      File.write(File.join(dir, "pwd_probe.rb"), "File.write(#{File.join(dir, "pwd").dump}, Dir.pwd)\n")
      out, err, code = run_ferrolock("locks", "--require", rails_environment, "--require", "pwd_probe.rb", "--json",
                                     chdir: dir)
      expect(code).to eq(0), err
      expect(JSON.parse(out).map { |lock| lock["name"] }).to eq([mutex]) # stdout: JSON only
      expect(File.read(File.join(dir, "pwd"))).to eq(File.realpath(File.join(FerrolockTest::ROOT,
                                                                             "spec/fixtures/rails_app")))
    end
  end

  it "exits 2 naming FERROLOCK_NAMESPACE when it is not a valid namespace" do
    out, err, code = run_ferrolock("locks", env: { "FERROLOCK_NAMESPACE" => "x" * (Ferrolock::MAX_NAME_BYTES + 1) })
    expect([code, out, err]).to match([2, "", include("FERROLOCK_NAMESPACE: namespace must be at most")])
  end

  it "exits 2 naming the file when the app's code fails to load" do
    Dir.mktmpdir("ferrolock-cli-") do |dir|
      File.write(File.join(dir, "broken.rb"), "raise 'no database'\n")
      File.write(File.join(dir, "typo.rb"), "def x(\n")
      expect(run_ferrolock("locks", "--require", "broken.rb", chdir: dir)[1..])
        .to match([include("--require broken.rb: no database (RuntimeError)"), 2])
      expect(run_ferrolock("locks", "--require", "typo.rb", chdir: dir)[1..])
        .to match([include("--require typo.rb:", "(SyntaxError)"), 2])
    end
  end
end
