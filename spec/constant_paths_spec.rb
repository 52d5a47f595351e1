# frozen_string_literal: true

require "spec_helper"
require_relative "support/constant_paths"

# Every constant under Ferrolock can be found from its name alone (Zeitwerk's rule, checked by
# spec/support/constant_paths.rb), and no file in lib/ is over 250 lines.
RSpec.describe "lib/ferrolock's layout" do
  paths = FerrolockTest::ConstantPaths

  it "has each file define the constant its path names, and nothing another path names" do
    problems = paths.static_problems
    known, problems = problems.partition { |line| paths::NOT_YET.key?(line[/\A[^:]+/]) }
    expect(problems).to be_empty, problems.join("\n")
    fixed = paths::NOT_YET.keys - known.map { |line| line[/\A[^:]+/] }
    expect(fixed).to be_empty, "laid out now, take them out of ConstantPaths::NOT_YET: #{fixed.join(", ")}"
  end

  # Loaded with the integrations' gems (Sidekiq, ActiveJob, and Rails for the railtie where the lane
  # has it), every file is reached by the constant its path names, and Module#const_source_location
  # agrees for every constant defined while loading (Class.new, const_set, a block's constants included).
  it "loads every file by the constant it names, and each loaded constant comes from its own file" do
    out = run_ruby!(<<~RUBY, timeout: 60)
      require "sidekiq"
      require "active_job"
      # Rails for the railtie, where the lane has it (not the Ruby 3.4 lane).
      rails = begin
        require "rails"
      rescue LoadError
        false
      end
      require "ferrolock"
      require "ferrolock/testing"
      require "logger"
      # The deprecated names' files log their warning (to Sidekiq's logger, stdout) when loaded.
      Ferrolock.configure { |c| c.logger = Logger.new($stderr) }
      require #{File.expand_path("support/constant_paths", __dir__).dump}
      paths = FerrolockTest::ConstantPaths
      lib = paths::LIB
      paths.files.each do |file|
        next if file == "ferrolock/railtie.rb" && !rails

        name = paths.constant_for(file)
        # A file outside what `require "ferrolock"` reaches (ActiveJob::Uniqueness, the Web tab, the
        # testing helpers) is required by its own path first, as its README section says.
        begin
          Object.const_get(name)
        rescue NameError
          require File.join(lib, file)
          Object.const_get(name)
        end
        puts "not loaded by its constant: \#{file}" unless $LOADED_FEATURES.include?(File.join(lib, file))
      rescue NameError, LoadError => e
        puts "\#{file}: \#{e.class}: \#{e.message.lines.first.chomp}"
      end
      puts paths.loaded_problems
      puts "checked \#{paths.files.size} files"
    RUBY
    problems = out.lines.map(&:chomp).reject { |l| l.start_with?("checked") || paths::NOT_YET.key?(l[/\A[^:]+/]) }
    expect(problems).to be_empty, problems.join("\n")
    expect(out[/checked (\d+) files/, 1].to_i).to be > 150
  end

  # The names constants had before they moved (CHANGELOG: Unreleased, Changed): each is autoloaded
  # from the file its name gives, so `defined?` answers it before any use, and still answers its
  # constant, with one deprecation warning per name per process.
  it "keeps every old name working as a deprecated alias that defined? sees" do
    renamed = {
      "Ferrolock::Sidekiq::DualLockMiddleware" => "Ferrolock::Sidekiq::DualLock::Middleware",
      "Ferrolock::Sidekiq::DualLockSettings" => "Ferrolock::Sidekiq::DualLock::Settings",
      "Ferrolock::FairTenant::ClientMiddleware" => "Ferrolock::Sidekiq::FairTenantMiddleware",
      "Ferrolock::Shoryuken::Lock" => "Ferrolock::Shoryuken::LockMiddleware",
      "Ferrolock::Subscription" => "Ferrolock::Events::Subscription",
      "Ferrolock::Configuration::FAIR_TENANT_MODES" => "Ferrolock::FairTenant::Config::MODES",
      "Ferrolock::Admin::SlotInfo" => "Ferrolock::Admin::LeaseInfo",
      "Ferrolock::Admin::Stage" => "Ferrolock::Admin::LeaseInfo"
    }
    %w[ClientMiddleware Digest Leases Lock Middleware OptionNames OnConflict Push Resumption Retry
       ServerMiddleware Settings Unsupported].each do |part|
      renamed["Ferrolock::Sidekiq::Unique#{part}"] = "Ferrolock::Sidekiq::Unique::#{part}"
    end
    %w[App Arguments NamespaceHint Options Output Password StatsCommand].each do |part|
      renamed["Ferrolock::Admin::Cli#{part}"] = "Ferrolock::Admin::Cli::#{part}"
    end
    out = run_ruby!(<<~RUBY)
      require "logger"
      require "stringio"
      require "ferrolock"
      require "ferrolock/admin"
      log = StringIO.new
      Ferrolock.configure { |c| c.logger = Logger.new(log) }
      #{renamed.to_a.inspect}.each do |old, new|
        # defined? as users write it (a literal path), before the old name is used: no warning yet.
        puts "before \#{old} \#{eval("defined?(\#{old})").inspect} \#{log.string.include?(": \#{old[/\\w+\\z/]} is")}"
        2.times { puts "\#{old} \#{Object.const_get(old).equal?(Object.const_get(new))}" }
        puts "after \#{old} \#{eval("defined?(\#{old})").inspect}"
      end
      puts "registered \#{Ferrolock::Deprecation.renamed_names.sort.inspect}"
      puts "warnings \#{log.string.scan(/is deprecated, use /).size}"
    RUBY
    expect(out[/^registered (.*)$/, 1]).to eq(renamed.sort.inspect)
    expect(out.lines.grep(/^before /).map { |line| line.split[2..].join(" ") }.uniq).to eq(['"constant" false'])
    expect(out.lines.grep(/^after /).map { |line| line.split[2] }.uniq).to eq(['"constant"'])
    expect(out.lines.grep(/^Ferrolock.* false$/)).to eq([])
    expect(out.lines.grep(/^Ferrolock.* true$/).size).to eq(2 * renamed.size)
    expect(out[/warnings (\d+)/, 1].to_i).to eq(renamed.size)
  end

  it "has no file in lib/ over 250 lines" do
    long = Dir[File.join(FerrolockTest::LIB, "**", "*.rb")].filter_map do |file|
      lines = File.foreach(file).count
      "#{file.delete_prefix("#{FerrolockTest::LIB}/")}: #{lines} lines" if lines > 250
    end
    expect(long).to eq([])
  end
end
