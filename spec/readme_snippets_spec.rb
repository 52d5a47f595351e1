# frozen_string_literal: true

# Every ```ruby block of README.md (and of the doc/ pages in snippet_pages) runs verbatim, each in a
# fresh Ruby process against the test Redis (REDIS_URL), after `require "ferrolock"` and, when it
# names Sidekiq, `require "sidekiq"`.
# A new block that does not run fails this spec. The only additions are:
# - APP_CODE: stand-ins for the app's own methods and constants a block calls (build_report,
#   Record …), each added only to the blocks that call it;
# - SHORYUKEN: a block naming Shoryuken runs with the real, vendored Shoryuken 6.2.1 loaded first
#   (outside Bundler: its Debian dependencies are not in the Gemfile), and must leave our Lock in
#   Shoryuken's server chain right before AutoDelete; skipped when the vendored copy is absent.
require_relative "support/redis_cluster"
require_relative "support/real_shoryuken"
require_relative "support/redis_sentinel"

RSpec.describe "README.md ruby snippets" do
  readme = File.read(File.join(FerrolockTest::ROOT, "README.md"))
  # The README's blocks, and those of the doc/ pages its reference detail moved to: [place, code].
  snippet_pages = %w[README.md doc/ACTIVE_JOB.md doc/REFERENCE.md]
  snippets = snippet_pages.flat_map do |page|
    text = File.read(File.join(FerrolockTest::ROOT, page))
    text.to_enum(:scan, /^```ruby\n(.*?)^```$/m).map do
      match = Regexp.last_match
      ["#{page}:#{text[0, match.begin(0)].count("\n") + 1}", match[1]]
    end
  end

  app_code = {
    "StatsD" => "module StatsD; def self.increment(_name) = nil; end",
    "build_report" => "def build_report = :report",
    "fetch" => "def fetch(url) = url",
    "url" => 'def url = "https://example.com/"',
    "Record" => "Record = Struct.new(:id) { def self.find(id) = new(id) }",
    "mirror" => "def mirror(record) = record",
    "push_to_erp" => "def push_to_erp(order) = order",
    "order" => "def order = :order"
  }.freeze

  # The real, vendored Shoryuken 6.2.1 (aws-sdk-sqs is not installable: only its constant is needed).
  shoryuken = <<~RUBY
    require "aws-sdk-core"
    module Aws; module SQS; Client = Class.new; end; end
    $LOAD_PATH.unshift(#{File.join(FerrolockTest::RealShoryuken::DIR, "lib").dump})
    require "shoryuken"
    Shoryuken.const_set(:CLI, Class.new) # configure_server yields only inside the shoryuken server
  RUBY

  # A name the block calls without defining it (not a method call on something, not a keyword label).
  calls = lambda do |code, name|
    code.match?(/(?<![.\w:@$])#{name}\b(?![:\w])/) && !code.match?(/(def|class|module) (self\.)?#{name}\b|#{name} =/)
  end

  # A snippet for a Redis Cluster or Sentinel runs against a real one (spec/support/redis_cluster.rb,
  # redis_sentinel.rb), its addresses in the environment variables ferrolock documents.
  def topology_env(code)
    env = {}
    env["FERROLOCK_REDIS_CLUSTER"] = FerrolockTest::RedisCluster.shared.urls.join(",") if code.include?("REDIS_CLUSTER")
    if code.include?("REDIS_SENTINELS")
      sentinel = FerrolockTest::RedisSentinel.shared
      env.merge!("FERROLOCK_REDIS_SENTINELS" => sentinel.urls(with_password: false).join(","),
                 "FERROLOCK_REDIS_SENTINEL_NAME" => FerrolockTest::RedisSentinel::NAME,
                 "FERROLOCK_REDIS_SENTINEL_PASSWORD" => sentinel.password)
    end
    env
  end

  # The README stands alone: every project file it names is in the repository (config/… paths are
  # the reader's own Rails app), and it points to no document outside it (such as a product spec).
  it "names only files that exist in the repository" do
    named = readme.scan(%r{[\w./-]+\.(?:rb|md|rs|lua|rbs|yml)\b}).uniq.reject { |path| path.start_with?("config/") }
    missing = named.reject do |path|
      File.exist?(File.join(FerrolockTest::ROOT, path)) || Dir.glob(File.join(FerrolockTest::ROOT, "**", path)).any?
    end
    expect(missing).to eq([])
    expect(readme).not_to match(/SPEC\.md/)
  end

  # A link to a file of the repository, and to a heading in it (#anchor, as GitHub makes it), from
  # the README or a doc/ page, leads somewhere: sections move between these files.
  it "links only to files and headings that exist (README.md and doc/*.md)" do
    slug = ->(heading) { heading.strip.downcase.gsub(/[^\p{Word}\- ]/, "").tr(" ", "-") }
    anchors = Hash.new do |cache, path|
      cache[path] = File.read(path).scan(/^#+ (.+)$/).flatten.map(&slug)
    end
    pages = [File.join(FerrolockTest::ROOT, "README.md"), *Dir[File.join(FerrolockTest::ROOT, "doc", "*.md")]]
    broken = pages.flat_map do |page|
      local = File.read(page).scan(/\]\(([^)\s]+)\)/).flatten.grep_v(%r{\A\w+://})
      local.filter_map do |target|
        file, anchor = target.split("#", 2)
        path = file.empty? ? page : File.expand_path(file, File.dirname(page))
        next "#{File.basename(page)}: #{target} (no such file)" unless File.exist?(path)
        next if anchor.nil? || File.directory?(path) || !path.end_with?(".md")

        "#{File.basename(page)}: #{target} (no such heading)" unless anchors[path].include?(anchor)
      end
    end
    expect(broken).to eq([])
  end

  it "has ruby snippets to run" do
    expect(snippets.size).to be >= 10
  end

  snippets.each do |line, code|
    first = code.lines.first.strip
    it "runs the snippet at #{line} (#{first[0, 60]})" do
      placeholders = code.lines.map { |l| l.sub(/#.*/, "") }.grep(/…|\.\.\.\s*$/)
      expect(placeholders).to eq([]), "#{line}: a placeholder is not Ruby (`…` parses as a method call)"
      prelude = [%(require "ferrolock")]
      prelude << %(require "sidekiq") if code.match?(/(?<![:\w])Sidekiq\b/)
      uses_shoryuken = code.match?(/(?<![:\w])Shoryuken\b/)
      if uses_shoryuken
        reason = FerrolockTest::RealShoryuken.missing
        skip(reason) if reason
        prelude << shoryuken
      end
      prelude.concat(app_code.select { |name, _| calls.call(code, name) }.values)
      script = [*prelude, "# ---- #{line}", code,
                "# ---- the configuration it leaves still gives a working client",
                %(abort "ferrolock client: \#{Ferrolock.client.ping.inspect}" unless Ferrolock.client.ping == "PONG"),
                (uses_shoryuken ? %(puts "chain: \#{Shoryuken.server_middleware.entries.map(&:klass).join(" ")}") : "")]
               .join("\n")
      # Shoryuken's snippets run outside Bundler (its gems are Debian's, not the Gemfile's).
      out, err, status = run_ruby(script, env: topology_env(code), timeout: 60, unbundled: uses_shoryuken)
      expect(status).to be_success, "#{line} failed (exit #{status.exitstatus}):\n#{err}\n#{out}"
      # A snippet that says what it logs must log it (stderr: the default logger; stdout: Sidekiq's).
      code.scan(/# logs "([^"]+)"/).flatten.each do |logged|
        expect(err + out).to include(logged), "#{line} did not log #{logged.inspect}:\n#{err}\n#{out}"
      end
      if code.include?("Shoryuken::Middleware::Server::AutoDelete, Ferrolock::Shoryuken::LockMiddleware")
        expect(out).to include("Ferrolock::Shoryuken::LockMiddleware Shoryuken::Middleware::Server::AutoDelete")
      end
    end
  end
end
