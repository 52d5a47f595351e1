# frozen_string_literal: true

require "optparse"
require_relative "password"

module Ferrolock
  class Admin
    class Cli
      # The `ferrolock` command's options: the global ones (--url, --namespace, --json, --help)
      # accepted before or after the command, plus each command's own.
      class Options
        COMMANDS = {
          "locks" => ["locks [PATTERN]", "DistMutex and DualLock locks whose name matches PATTERN (a Redis glob)"],
          "show" => ["show NAME", "everything held under NAME: lock, DualLock stages, limiter slots"],
          "release" => ["release NAME --force", "release what holds NAME; the next waiter gets it (needs --force)"],
          "limiters" => ["limiters [PATTERN]", "ConcurrentLimiters with a live slot, a waiter or a limit set live"],
          "tenants" => ["tenants CLASS", "FairTenant counts of a job class's tenants and the queue each goes to"],
          "markers" => ["markers [QUEUE_PATTERN]", "Shoryuken message markers (in progress / processed)"],
          "uniques" => ["uniques [PATTERN]",
                        "Sidekiq uniqueness digests of job classes matching PATTERN (or a digest glob unique:...)"],
          "rate-limiters" => ["rate-limiters [PATTERN]",
                              "RateLimiters with state in Redis: remaining now, reset in, reserved slots"],
          "concurrency" => ["concurrency [PATTERN]",
                            "ActiveJob limits_concurrency keys (group/key): the jobs holding slots, the blocked ones"],
          "stats" => ["stats NAME", "NAME's history: events per primitive, waits p50/p95/p99 (--since, default 1h)"],
          "limit" => ["limit NAME [N]",
                      "set ConcurrentLimiter (--concurrency: limits_concurrency key) NAME's limit to N live " \
                      "(--clear: undo)"],
          "pause" => ["pause NAME", "NAME takes no new holder until resumed: jobs wait or are blocked " \
                                    "(a Shoryuken queue's messages come back later), none dropped"],
          "resume" => ["resume NAME", "undo pause NAME: the waiters run, blocked jobs are enqueued"]
        }.freeze
        # What loading the app's code (--require FILE, on every command) adds beyond its configuration.
        REQUIRES = {
          "tenants" => "defines the job class and its rules",
          "limiters" => "defines the app's limiters: a limit of theirs shows beside a different stored one",
          "show" => "defines the app's limiters and job classes: their limits and lock types show",
          "uniques" => "defines the job classes: their lock type shows",
          "rate-limiters" => "defines the app's rate limiters: Redis keeps no limit, so limit and remaining need them"
        }.freeze
        REQUIRE_HELP = ["load the app's code first: its configuration gives the namespace and Redis",
                        "(e.g. config/environment.rb: a file in a Rails app is loaded from the app's root)"].freeze
        URL_HELP = "Redis URL (default: FERROLOCK_REDIS_URL, REDIS_URL, redis://127.0.0.1:6379/0)"

        # Parsed values; :help holds the help text when --help was given.
        attr_reader :values

        def initialize
          @values = { json: false, force: false, clear: false, limit: 1000, requires: [], since: "1h" }
        end

        def global_parser
          OptionParser.new do |opts|
            commands = COMMANDS.values.map { |use, text| format("    %<use>-27s %<text>s", use: use, text: text) }
            opts.banner = "Usage: ferrolock [options] COMMAND [ARGS]\n\nCommands:\n#{commands.join("\n")}\n\nOptions:"
            global_options(opts)
            opts.separator("\nEvery command also takes --require FILE: the app's code, for its namespace and Redis.")
            opts.separator("Options go before PATTERN or NAME (--json, --force and --help may also follow it);")
            opts.separator("-- ends them: `ferrolock locks -- \"$PATTERN\"` never reads a pattern as an option.")
            opts.separator("Exit codes: 0 ok, 1 not found, 2 usage, 3 Redis unreachable.")
          end
        end

        def command_parser(command)
          use, text = COMMANDS.fetch(command)
          OptionParser.new do |opts|
            opts.banner = "Usage: ferrolock #{use} [options]\n\n#{text}.\n\nOptions:"
            command_options(opts, command)
            global_options(opts)
          end
        end

        # The argument words of a command's usage ("NAME", "[PATTERN]").
        def self.arguments(command)
          COMMANDS.fetch(command).first.split.drop(1).reject { |word| word.start_with?("--") }
        end

        private

        def command_options(opts, command)
          opts.on("--force", "really release (required)") { @values[:force] = true } if command == "release"
          opts.on("--clear", "back to the limit the code passes") { @values[:clear] = true } if command == "limit"
          kind_options(opts, command)
          if command == "stats"
            opts.on("--since AGO", "how far back: 90s, 15m, 1h (default), 3d; up to 72h") do |ago|
              @values[:since] = ago
            end
          end
          also = REQUIRES.key?(command) ? ["(it also #{REQUIRES[command]})"] : []
          opts.on("-r", "--require FILE", *REQUIRE_HELP, *also) { |file| @values[:requires] << file }
          return if %w[show release stats limit pause resume].include?(command)

          opts.on("--limit N", Integer, "list at most N (default 1000)") { |n| @values[:limit] = positive!(n) }
        end

        # What NAME is for limit, pause and resume (a limiter's name by default).
        def kind_options(opts, command)
          return unless %w[limit pause resume].include?(command)

          opts.on("--concurrency", "NAME is an ActiveJob limits_concurrency key (group/key), not a limiter") do
            @values[:concurrency] = true
          end
          return if command == "limit"

          opts.on("--queue", "NAME is a Shoryuken queue: its LockMiddleware runs no message while paused") do
            @values[:queue] = true
          end
        end

        def global_options(opts)
          opts.on("--url URL", URL_HELP) { |url| @values[:url] = url }
          opts.on("--password-file FILE", "read the Redis password from FILE (or set #{Cli::Password::ENV_VAR};",
                  "either replaces the URL's): not on the command line, where ps shows it") do |file|
            @values[:password_file] = file
          end
          opts.on("--namespace NS", "key namespace (default: the configured one: --require's,",
                  "else #{Configuration::NAMESPACE_ENV}, else #{Configuration::DEFAULT_NAMESPACE})") do |ns|
            @values[:namespace] = ns
          end
          opts.on("--json", "print JSON instead of a table") { @values[:json] = true }
          opts.on("-h", "--help", "show this help") { @values[:help] = opts.to_s }
        end

        def positive!(number)
          raise OptionParser::InvalidArgument, "--limit must be positive, got #{number}" unless number.positive?

          number
        end
      end
    end
  end
end
