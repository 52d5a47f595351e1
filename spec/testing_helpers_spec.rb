# frozen_string_literal: true

# ferrolock/testing/rspec and ferrolock/testing/minitest in an app's own test run: each suite
# runs in a child process whose REDIS_URL points at a closed port, so anything reaching for
# Redis fails it.
RSpec.describe "Ferrolock::Testing's test-framework helpers" do
  let(:closed) { { "REDIS_URL" => "redis://127.0.0.1:#{FerrolockTest::RedisServer.free_port}/0" } }

  def run_suite(code)
    out, err, status = run_ruby(code, env: closed, timeout: 60)
    [out + err, status.success?]
  end

  it "RSpec: resets the state and the mode before each example; metadata picks the mode" do
    spec = <<~RUBY
      require "ferrolock/testing/rspec"

      RSpec.describe "an app" do
        report = Ferrolock::DistMutex.new("report") # (as an app keeps one in a constant)

        it "1 leaves a lock held and the mode switched" do
          expect(report.try_lock).to eq(true)
          Ferrolock::Testing.disable!
        end

        it "2 starts in fake mode with nothing held, not even by this thread" do
          expect([Ferrolock::Testing.mode, report.locked?, report.owned?]).to eq([:fake, false, false])
          report.synchronize { expect(report.owned?).to eq(true) }
        end

        it "3 runs disabled", ferrolock: :disable do
          expect(Ferrolock::Testing.disabled?).to eq(true)
        end

        describe "a group", ferrolock: :disabled do
          it "4 runs disabled too" do
            expect(Ferrolock::Testing.mode).to eq(:disabled)
          end
        end
      end
    RUBY
    Dir.mktmpdir do |dir|
      path = File.join(dir, "app_spec.rb")
      File.write(path, spec)
      # An app's run: its own options, not this suite's .rspec (whose spec_helper fails an example
      # that leaves a lock held, as the app's first example does on purpose).
      options = ["--options", File::NULL, "--order", "defined", path]
      run = %(ARGV.replace(#{options.inspect})\nload Gem.bin_path("rspec-core", "rspec"))
      out, ok = run_suite(run)
      expect([out[/\d+ examples?, \d+ failures?/], ok]).to eq(["4 examples, 0 failures", true]), out
    end
  end

  it "Minitest: resets before each test, restores the mode after it; ActiveSupport's travel moves fake time" do
    out, ok = run_suite(<<~RUBY)
      require "minitest/autorun"
      require "active_support"
      require "active_support/testing/time_helpers"
      require "ferrolock/testing/minitest"

      class AppTest < Minitest::Test
        include ActiveSupport::Testing::TimeHelpers
        include Ferrolock::Testing::Minitest
        i_suck_and_my_tests_are_order_dependent!

        RULES = [{ queue: "slow", threshold: 1, per: 3600 }].freeze

        def route(jid)
          Ferrolock::FairTenant.queue_for(RULES, job_class: "ReportJob", tenant: "acme", jid: jid, queue: "default")
        end

        def test_1_travel_frees_an_expiring_lock_and_ends_a_fair_tenant_window
          spacer = Ferrolock::DistMutex.new("spacer", expire: 60, auto_release: false)
          assert spacer.try_lock
          spacer.unlock
          refute Ferrolock::DistMutex.new("spacer", expire: 60, auto_release: false).try_lock
          assert_equal %w[default slow], [route("a"), route("b")]
          travel 3601
          assert Ferrolock::DistMutex.new("spacer", expire: 60, auto_release: false).try_lock
          assert_equal "default", route("c")
          Ferrolock::Testing.disable!
        ensure
          travel_back
        end

        REPORT = Ferrolock::DistMutex.new("report")

        def test_2_starts_in_the_previous_mode_with_nothing_counted
          assert Ferrolock::Testing.fake?
          assert_equal %w[default slow], [route("a"), route("b")]
          assert REPORT.try_lock # left held for the next test
        end

        def test_3_starts_with_nothing_held_by_this_thread
          refute REPORT.owned?
          assert_equal :ran, REPORT.synchronize { :ran }
        end
      end
    RUBY
    summary = out[/\d+ runs, \d+ assertions, \d+ failures, \d+ errors/]
    expect([summary, ok]).to eq(["3 runs, 10 assertions, 0 failures, 0 errors", true]), out
  end
end
