# frozen_string_literal: true

# Serves Sidekiq::Web with ferrolock's "Locks" tab from WEBrick on 127.0.0.1:ARGV[0] (the
# real-browser test, spec/web_browser_spec.rb). Prints "listening" once it accepts connections.
require "ferrolock"
require "webrick"
# Rack 3 (Sidekiq 8) moved the server handlers to the rackup gem.
begin
  require "rackup/handler/webrick"
  handler = Rackup::Handler::WEBrick
rescue LoadError
  require "rack/handler/webrick"
  handler = Rack::Handler::WEBrick
end
require_relative "sidekiq_version"
FerrolockTest::SidekiqVersion.setup!
require_relative "sidekiq_web"
require_relative "web_fixture"
FerrolockTest::SidekiqWeb.load!

# The FairTenant page looks the job class up for its rules.
class FerrolockWebHeavyJob
  include Sidekiq::Worker
  sidekiq_options queue: "default", fair_tenant_queues: FerrolockTest::WebFixture::RULES
end

Ferrolock.logger.level = :error
port = Integer(ARGV.fetch(0))
handler.run(FerrolockTest::SidekiqWeb.app, Host: "127.0.0.1", Port: port,
                                           Logger: WEBrick::Log.new(File::NULL), AccessLog: [],
                                           StartCallback: -> { puts("listening") || $stdout.flush })
