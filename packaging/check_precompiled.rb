# frozen_string_literal: true

require "fileutils"
require "open3"
require "tmpdir"
require_relative "gem_source"
require_relative "pick_check"
require_relative "precompiled_gem"
require_relative "user_shell"
require_relative "variant_choice"
require_relative "../demo/throwaway_redis"

module Packaging
  # bin/check-precompiled-gem: the precompiled gem on the Ruby running this, as a user without Rust meets
  # it. Each check prints what it saw, or raises Failed.
  class CheckPrecompiled
    class Failed < StandardError; end

    ROOT = File.expand_path("..", __dir__)
    # Seconds `gem install` may take; more under emulation (bin/arm64: about 30 s there).
    INSTALL_SECONDS = Float(ENV.fetch("FERROLOCK_INSTALL_SECONDS", "30"))
    SMOKE_CHECK = File.join(__dir__, "smoke_check.rb")

    # Run by the user's Ruby: loads the installed gem, checks which library it loaded, PINGs ARGV[0].
    LOAD_AND_PING = <<~'RUBY'
      require "ferrolock"
      spec = Gem.loaded_specs.fetch("ferrolock")
      expected = File.join(spec.full_gem_path, "lib", "ferrolock", RUBY_VERSION[/\A\d+\.\d+/], "ferrolock.so")
      loaded = $LOADED_FEATURES.grep(%r{/ferrolock\.so\z})
      abort "loaded #{loaded}, not #{expected}" unless loaded == [expected] && expected.start_with?(ENV["GEM_HOME"])
      abort "#{spec.full_name} has extensions #{spec.extensions}" unless spec.extensions.empty?
      pong = Ferrolock::Client.new(url: ARGV[0]).ping
      abort "ping answered #{pong.inspect}" unless pong == "PONG"
      print "#{spec.full_name} loaded #{loaded.first.delete_prefix("#{ENV["GEM_HOME"]}/")}; ping: #{pong}"
    RUBY

    # Run by the user's Ruby: prints the LoadError that requiring ferrolock raises; fails when it loads.
    LOAD_ERROR = <<~'RUBY'
      begin
        require "ferrolock"
      rescue LoadError => e
        print e.message
        exit 0
      end
      exit 1
    RUBY

    # other_gems: the precompiled gems of other platforms, beside it in the gem source that `gem install`
    # and Bundler pick from.
    # smoke_only: install, load, ping and the smoke check only (bin/test's emulated 3.3 and 3.4 lanes: the
    # checks after it are RubyGems' and Bundler's platform rules, run natively on those Rubies and emulated on
    # 3.1, and take minutes more under emulation).
    def initialize(source_gem, precompiled_gem, *other_gems, smoke_only: false)
      @smoke_only = smoke_only
      @source_gem = File.expand_path(source_gem)
      @gem = PrecompiledGem.new(File.expand_path(precompiled_gem))
      @other_gems = other_gems.map { |path| File.expand_path(path) }
      @abi = RUBY_VERSION[/\A\d+\.\d+/]
    end

    def run
      Dir.mktmpdir("ferrolock-precompiled-") do |tmp|
        @tmp = tmp
        @user = UserShell.new(tmp)
        installed = install
        with_redis do |url|
          load_and_ping(url)
          smoke(url)
        end
        return say("the checks after the smoke check are left to the other lanes (--smoke-only)") if @smoke_only

        lacking_library(installed)
        ruby_requirement
        PickCheck.new(self, @user, @tmp).run(@source_gem, @gem, lacking_gem, @other_gems)
      end
    end

    def say(line)
      puts "precompiled gem on Ruby #{@abi}: #{line}"
    end

    def check(condition, failure)
      raise Failed, failure unless condition
    end

    def describe(precompiled)
      "a precompiled gem for Ruby #{precompiled.abis.join(", ")}"
    end

    private

    def gem_home
      File.join(@tmp, "gems")
    end

    def user_ruby(script, *args)
      @user.run("ruby", "-e", script, *args, env: { "GEM_HOME" => gem_home, "GEM_PATH" => gem_home })
    end

    # `gem install --local` with no Rust on PATH: nothing compiles, it takes seconds.
    def install
      rust = @user.find_command("cargo", "rustc")
      check(rust.nil?, "#{rust} is on PATH=#{@user.path}: this would not show an install without Rust")
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      output, ok = @user.run("gem", "install", "--local", "--no-document", "--install-dir", gem_home, @gem.path)
      seconds = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
      check(ok && !output.match?(/native extension/i), "gem install failed or compiled:\n#{output}")
      check(seconds < INSTALL_SECONDS, "gem install took #{seconds.round(1)} s")
      installed = Dir[File.join(gem_home, "gems", "ferrolock-*")].first
      say "installed in #{seconds.round(1)} s, nothing compiled; #{disk_kib(installed)} KiB in #{installed}"
      installed
    end

    def disk_kib(dir)
      Dir.glob("**/*", base: dir).sum { |file| File.size(File.join(dir, file)) } / 1024
    end

    def with_redis
      redis = Demo::ThrowawayRedis.new(prefix: "ferrolock-precompiled-redis-").start
      yield redis.url
    ensure
      redis&.stop
    end

    # From outside the repo: the library of this Ruby's ABI from the installed gem, a PING, the command.
    def load_and_ping(url)
      output, ok = user_ruby(LOAD_AND_PING, url)
      check(ok, "loading the installed gem: #{output}")
      say output
      output, ok = @user.run(File.join(gem_home, "bin", "ferrolock"), "--url", url, "locks",
                             env: { "GEM_HOME" => gem_home, "GEM_PATH" => gem_home })
      check(ok && output.match?(/^KIND/), "the ferrolock command: #{output}")
    end

    # A DistMutex, a ConcurrentLimiter, a RateLimiter and ActiveJob limits_concurrency, each once for real.
    def smoke(url)
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      # ActiveJob from the system's gems (Debian's rubygems-integration), ferrolock from the installed gem.
      system_gems = Gem.default_path - [Gem.user_dir]
      output, ok = @user.run("ruby", "-e", File.read(SMOKE_CHECK), url,
                             env: { "GEM_HOME" => gem_home, "GEM_PATH" => [gem_home, *system_gems].join(":") })
      check(ok, "the smoke check: #{output}")
      seconds = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
      output.each_line { |line| say line.chomp }
      say "smoke check passed in #{seconds.round(1)} s"
    end

    # What a Ruby the gem lacks would find (its ABI's folder missing): a LoadError naming the source gem.
    def lacking_library(installed)
      FileUtils.rm_rf(File.join(installed, "lib", "ferrolock", @abi))
      message, raised = user_ruby(LOAD_ERROR)
      check(raised, "ferrolock loaded without lib/ferrolock/#{@abi}/ferrolock.so")
      check(message.include?("gem install ferrolock --platform ruby"), "a LoadError without the way out: #{message}")
      say "without lib/ferrolock/#{@abi}: LoadError \"#{message}\""
    end

    # Its required_ruby_version admits exactly the Rubies it holds a library for.
    def ruby_requirement
      expected = @gem.expected_admissions
      wrong = expected.reject { |ruby, admitted| @gem.admits?(ruby) == admitted }.keys
      check(wrong.empty?, "required_ruby_version #{@gem.spec.required_ruby_version} is wrong for #{wrong.join(", ")}")
      say "its required_ruby_version admits Ruby #{@gem.abis.map { |abi| "#{abi}.x" }.join(" and ")}, " \
          "not #{expected.reject { |_, admitted| admitted }.keys.join(", ")}"
    end

    # A precompiled gem built from the same gemspec without this Ruby's ABI: refused when given by path.
    def lacking_gem
      others = @gem.abis - [@abi]
      check(others.any?, "#{@gem.path} holds no other Ruby ABI than #{@abi}")
      lacking = build_precompiled(others)
      output, ok = @user.run("gem", "install", "--local", "--no-document", "--install-dir", File.join(@tmp, "refused"),
                             lacking.path)
      check(!ok && output.include?("requires Ruby version"), "#{describe(lacking)} on Ruby #{@abi}: #{output}")
      say "#{describe(lacking)} alone: refused (#{output[/requires Ruby version.*/]})"
      lacking
    end

    # Built by the gemspec from the files of the gem under test (its platform, its libraries).
    def build_precompiled(abis)
      dir = FileUtils.mkdir_p(File.join(@tmp, "lacking")).first
      unpacked = File.join(dir, "unpacked")
      Gem::Package.new(@gem.path).extract_files(unpacked)
      FileUtils.cp(File.join(ROOT, "ferrolock.gemspec"), unpacked)
      path = File.join(dir, File.basename(@gem.path))
      env = { "FERROLOCK_PRECOMPILED" => abis.join(" "), "FERROLOCK_PLATFORM" => @gem.spec.platform.to_s }
      output, ok = Open3.capture2e(env, "gem", "build", "ferrolock.gemspec", "--output", path, chdir: unpacked)
      check(ok, "building a precompiled gem for Ruby #{abis.join(", ")}: #{output}")
      PrecompiledGem.new(path)
    end
  end
end
