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

# /__fit?path=/locks&width=1280: the page at `path` in a `width`-pixel frame, and (in <pre id="fit">,
# written once it loaded, so --dump-dom has it) how wide its ferrolock table is against the box
# around it and Sidekiq's container. Same origin, so the script can measure inside the frame.
FIT_PAGE = <<~HTML
  <!doctype html>
  <html><head><meta charset="utf-8"><script>
    function measure(frame) {
      var doc = frame.contentDocument, table = doc.querySelector("table.ferrolock-locks, table.ferrolock-uniques");
      var container = doc.querySelector("body .container") || doc.body;
      var edge = function (el) { return Math.round(el.getBoundingClientRect().right); };
      document.getElementById("fit").textContent = JSON.stringify({
        table_right: edge(table), container_right: edge(container),
        box_scroll: table.parentElement.scrollWidth, box_client: table.parentElement.clientWidth,
        page_scroll: doc.documentElement.scrollWidth, page_client: doc.documentElement.clientWidth });
    }
  </script></head>
  <body style="margin:0"><iframe src="%<path>s" onload="measure(this)" style="width:%<width>dpx;height:900px;border:0"></iframe>
  <pre id="fit"></pre></body></html>
HTML

fit = lambda do |env|
  params = Rack::Utils.parse_query(env["QUERY_STRING"])
  path = params.fetch("path", "/locks")
  raise ArgumentError, "path must be a path of this server" unless path.match?(%r{\A/[\w/?=&.%-]*\z})

  [200, { "content-type" => "text/html" },
   [format(FIT_PAGE, path: path, width: Integer(params.fetch("width", "1280")))]]
end
# /__fit frames the tab's pages to measure them, and the tab forbids framing (X-Frame-Options: DENY,
# checked by spec/sidekiq_web_spec.rb and spec/secrets_spec.rb): this test server alone lets its own
# /__fit page frame them.
sidekiq_web = FerrolockTest::SidekiqWeb.app
web = lambda do |env|
  status, headers, body = sidekiq_web.call(env)
  framed_by_fit = env["HTTP_REFERER"].to_s.include?("/__fit")
  headers = headers.reject { |name, _| name.to_s.casecmp?("x-frame-options") } if framed_by_fit
  [status, headers, body]
end
app = Rack::Builder.new do
  map("/__fit") { run fit }
  map("/") { run web }
end

Ferrolock.logger.level = :error
port = Integer(ARGV.fetch(0))
handler.run(app, Host: "127.0.0.1", Port: port,
                 Logger: WEBrick::Log.new(File::NULL), AccessLog: [],
                 StartCallback: -> { puts("listening") || $stdout.flush })
