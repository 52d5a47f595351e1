# frozen_string_literal: true

require "securerandom"
require "ferrolock/admin/cli/password"

module FerrolockTest
  # A password-protected redis-server (requirepass, an ACL user, a unix socket) and every way a URL
  # can carry its passwords, for spec/secrets_spec.rb.
  # Each password holds a random core (`secrets`): no output may contain one, escaped or not.
  class SecretUrls
    USER = "worker"

    attr_reader :server, :password, :user_password, :secrets

    def initialize
      core = SecureRandom.hex(6)
      user_core = SecureRandom.hex(6)
      @secrets = [core, user_core]
      @password = "pw-#{core}"
      # Characters a URL must escape: the escaped form has to stay hidden too.
      @user_password = "p@ss:w/#{user_core} x"
    end

    def start
      @server = RedisServer.new(unixsocket: true).start
      @server.redis.call("ACL", "SETUSER", USER, "on", ">#{user_password}", "~*", "&*", "+@all")
      # Last: the spec's own redis-rb connection stays authenticated as the default user.
      @server.redis.call("CONFIG", "SET", "requirepass", password)
      self
    end

    def destroy
      @server&.destroy
    end

    # The maxmemory-policy, for the eviction warning (with anything but noeviction).
    def eviction_policy=(policy)
      server.redis.call("CONFIG", "SET", "maxmemory-policy", policy)
    end

    # URLs that reach the server and authenticate: name => URL.
    def working
      port = server.port
      socket = server.socket_path
      { "redis://:pw@" => "redis://:#{password}@127.0.0.1:#{port}/0",
        "redis://user:pw@" => "redis://#{USER}:#{escape(user_password)}@127.0.0.1:#{port}/0",
        "unix://?pass=" => "unix://#{socket}?pass=#{password}",
        "unix://?user=&pass=" => "unix://#{socket}?db=0&user=#{USER}&pass=#{escape(user_password)}",
        "redis_url = :sidekiq (socket)" => sidekiq_socket_url }
    end

    # URLs with a password that cannot be used: name => URL (a closed port, TLS to a plain
    # server, a missing socket).
    def failing
      closed = RedisServer.free_port
      { "redis://:pw@ (closed)" => "redis://:#{password}@127.0.0.1:#{closed}/0",
        "redis://user:pw@ (closed)" => "redis://#{USER}:#{escape(user_password)}@127.0.0.1:#{closed}/0",
        "rediss://:pw@ (plain server)" => "rediss://:#{password}@127.0.0.1:#{server.port}/0",
        "unix://?pass= (no socket)" => "unix://#{server.dir}/missing.sock?pass=#{password}",
        "redis://?password= (closed)" => "redis://127.0.0.1:#{closed}/0?password=#{password}" }
    end

    # Mistyped URLs (Client.new refuses them): name => URL.
    def mistyped
      { "redis//:pw@" => "redis//:#{password}@127.0.0.1:6379",
        "redis:pw@" => "redis:#{password}@127.0.0.1:6379",
        "http://:pw@" => "http://:#{password}@127.0.0.1:6379",
        "redis://:pw@ bad port" => "redis://:#{password}@127.0.0.1:notaport",
        "unix:?pass=" => "unix:#{server.dir}/r.sock?pass=#{password}" }
    end

    # What `c.redis_url = :sidekiq` builds when Sidekiq talks to Redis through a socket.
    def sidekiq_socket_url
      settings = Struct.new(:path, :db, :username, :password).new(server.socket_path, 0, nil, password)
      Ferrolock::Sidekiq::Compat.url_from(settings)
    end

    # The secrets `text` shows (none, we hope).
    def shown_in(text)
      secrets.select { |secret| text.to_s.include?(secret) }
    end

    # Percent-escaped as the `ferrolock` command puts a password into a URL.
    def escape(text) = Ferrolock::Admin::Cli::Password.escape(text)
  end
end
