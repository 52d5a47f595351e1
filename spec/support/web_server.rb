# frozen_string_literal: true

# Serves Sidekiq::Web with ferrolock's "Locks" tab from WEBrick on 127.0.0.1:ARGV[0] (the
# real-browser test, spec/web_browser_spec.rb). Prints "listening" once it accepts connections.
require "ferrolock"
require "webrick"
require "rack/handler/webrick"
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
Rack::Handler::WEBrick.run(FerrolockTest::SidekiqWeb.app, Host: "127.0.0.1", Port: port,
                                                          Logger: WEBrick::Log.new(File::NULL),
                                                          AccessLog: [],
                                                          StartCallback: -> { puts("listening") || $stdout.flush })
