# frozen_string_literal: true

require_relative "cli/app"
require_relative "cli/arguments"
require_relative "cli/options"
require_relative "cli/output"
require_relative "cli/namespace_hint"
require_relative "cli/password"
require_relative "cli/stats_command"
require_relative "cli/limit_commands"

module Ferrolock
  class Admin
    # The `ferrolock` command (exe/ferrolock). Exit codes: 0 ok, 1 not found, 2 usage,
    # 3 Redis unreachable. Only the redacted URL is ever printed, never a password.
    class Cli
      OK = 0
      NOT_FOUND = 1
      USAGE = 2
      UNREACHABLE = 3

      # What Cli#run raises to end with an exit code and a message on stderr.
      class Exit < StandardError
        attr_reader :code

        def initialize(code, message = "")
          super(message)
          @code = code
        end
      end

      COMMANDS = Cli::Options::COMMANDS

      include Cli::StatsCommand
      include Cli::LimitCommands

      def initialize(argv, out: $stdout, err: $stderr, env: ENV)
        @argv = argv.dup
        @out = out
        @err = err
        @env = env
        @parsed = Cli::Options.new
        @options = @parsed.values
      end

      def run
        @command = parse_command
        args = Cli::Arguments.operands(@parsed.command_parser(@command), @argv)
        raise Exit, OK if help

        args = arity!(@command, args)
        load_requires
        run_command(args)
      rescue Exit => e
        @err.puts(e.message) unless e.message.empty?
        e.code
      rescue OptionParser::ParseError, ArgumentError, TypeError => e
        @err.puts("ferrolock: #{redact(e.message)}")
        @err.puts(usage_hint)
        USAGE
      rescue Ferrolock::Error => e
        # Connection refused, timeouts, and refusals such as a wrong password: Redis cannot be used.
        @err.puts(redact("ferrolock: Redis unreachable at #{@client&.redacted_url || "the configured URL"}: " \
                         "#{e.message}"))
        UNREACHABLE
      end

      private

      def parse_command
        global = @parsed.global_parser
        @argv = Cli::Arguments.leading(global, @argv)
        command = @argv.shift
        raise Exit, OK if command.nil? && help
        raise Exit.new(USAGE, "ferrolock: no command given\n#{global}") if command.nil?
        raise Exit.new(USAGE, "ferrolock: unknown command #{command.inspect}\n#{global}") unless COMMANDS.key?(command)

        command
      end

      # Prints the help text if --help was given; true then.
      def help
        text = @options[:help] or return false
        @out.puts(text)
        true
      end

      def arity!(command, args)
        wanted = Cli::Options.arguments(command)
        required = wanted.count { |word| !word.start_with?("[") }
        return args if args.size.between?(required, wanted.size)

        usage!("#{command}: expected #{wanted.join(" ")}, got #{args.size} argument(s)")
      end

      # --require FILE: the app's code (its configuration: namespace and Redis; job classes,
      # limiters) before reading Redis. Cli::App may change directory to the app's root, so every
      # path given is made absolute first.
      def load_requires
        @options[:password_file] &&= File.expand_path(@options[:password_file])
        @options[:requires].map { |file| [file, File.expand_path(file)] }.each do |given, file|
          Cli::App.load(file, @err)
        rescue ScriptError, StandardError => e
          raise if e.is_a?(Ferrolock::Error) # Redis refused the app's boot: exit 3, as for any command

          # A ScriptError (LoadError, SyntaxError) too: no rescue below would turn it into an exit code.
          usage!("--require #{Table.text(given)}: #{e.message} (#{e.class})")
        end
      end

      # The listing commands: each reads every page of the Admin listing of that name (a pattern,
      # or the job class for tenants) and prints it as a table or JSON.
      LISTINGS = { "locks" => :locks, "limiters" => :limiters, "markers" => :markers, "tenants" => :tenants,
                   "uniques" => :uniques, "rate-limiters" => :rate_limiters, "concurrency" => :concurrency }.freeze

      def run_command(args)
        listing = LISTINGS[@command]
        listing ? run_listing(listing, *args) : send(:"run_#{@command}", *args)
      end

      def run_listing(listing, argument = "*")
        items = all_pages { |cursor| admin.public_send(listing, argument, cursor: cursor, per_page: 100) }
        output.public_send(listing, items)
        @err.puts("ferrolock: no #{@command}#{hint.in_namespace}#{hint.elsewhere}") if items.empty? && hint.elsewhere?
        OK
      end

      def run_show(name)
        items = admin.show(name)
        raise Exit.new(NOT_FOUND, "ferrolock: #{hint.nothing_holds(name)}#{hint.elsewhere}") if items.empty?

        output.show(items)
        OK
      end

      def run_release(name)
        usage!("release: add --force (a forced release cannot be undone)") unless @options[:force]

        released = admin.force_release(name)
        if released.empty?
          raise Exit.new(NOT_FOUND, "ferrolock: #{hint.nothing_holds(name)}#{hint.run_lock(name)}#{hint.elsewhere}")
        end

        output.released(released)
        OK
      end

      def hint
        @hint ||= Cli::NamespaceHint.new(admin.client)
      end

      # Every SCAN page (up to --limit items; the rest is announced on stderr).
      def all_pages
        items = []
        cursor = "0"
        loop do
          page = yield(cursor)
          items.concat(page.items)
          cursor = page.cursor
          break if page.last? || items.size >= @options[:limit]
        end
        if items.size > @options[:limit] || cursor != "0"
          @err.puts("ferrolock: showing the first #{@options[:limit]} (--limit N for more)")
        end
        items.first(@options[:limit])
      end

      def admin
        @admin ||= begin
          @client = Ferrolock::Client.new(**client_options)
          @client.ping
          Admin.new(client: @client)
        end
      end

      # The configured Redis (the app's, with --require), or --url. A configured Redis Cluster or
      # Sentinel set is used as configured; their passwords come from the configuration.
      def client_options
        namespace = { namespace: @options[:namespace] || Ferrolock.config.namespace }
        return namespace.merge(url: url) if @options[:url] || (!Ferrolock.config.redis_cluster &&
                                                              !Ferrolock.config.redis_sentinels)
        return namespace unless @options[:password_file]

        usage!("--password-file needs --url: a Redis Cluster or Sentinel set is configured")
      end

      def output
        @output ||= Cli::Output.new(@out, json: @options[:json])
      end

      # The URL the client is built from: --url or the configured one, with the password of
      # --password-file or FERROLOCK_REDIS_PASSWORD (Cli::Password).
      def url
        @url ||= Cli::Password.url_with(@options[:url] || Ferrolock.config.redis_url, password)
      end

      def password
        @password = Cli::Password.read(@options[:password_file], @env) unless defined?(@password)
        @password
      end

      # A message with every password masked, however the message got it (Redact's rules, and
      # the passwords this command knows, as given or escaped).
      def redact(message)
        known = [(password if defined?(@password)), *Cli::Password.secrets_in(@url || @options[:url] || configured_url)]
        Redact.text(message, known)
      end

      # nil when the configuration is what failed (a bad FERROLOCK_* variable): the message says so.
      def configured_url
        Ferrolock.config.redis_url
      rescue ArgumentError, TypeError
        nil
      end

      def usage!(message)
        raise Exit.new(USAGE, "ferrolock: #{message}\n#{usage_hint}")
      end

      def usage_hint
        @command ? "Run `ferrolock #{@command} --help` for usage." : "Run `ferrolock --help` for usage."
      end
    end
  end
end
