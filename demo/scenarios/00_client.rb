# frozen_string_literal: true

Demo.scenario("Client: one shared connection pool to Redis") do |report|
  client = Demo.client
  report.line("url (password redacted)", client.redacted_url)
  report.line("namespace", client.namespace)
  report.line("keys look like", client.key("nightly-report", "lock"))

  report.check("PING", client.ping == "PONG")
  samples = Array.new(200) do
    started = Demo.monotonic
    client.call("PING")
    Demo.monotonic - started
  end.sort
  report.line("PING round trip (median / p99)", "#{report.ms(samples[100])} / #{report.ms(samples[197])}")

  secret = Ferrolock::Client.new(url: "redis://:hunter2@127.0.0.1:6379/0")
  report.check("password never shown", !secret.inspect.include?("hunter2"), secret.inspect)

  answers = Array.new(8) { |t| Thread.new { Array.new(50) { |i| client.call("ECHO", "#{t}-#{i}") } } }.map(&:value)
  expected = Array.new(8) { |t| Array.new(50) { |i| "#{t}-#{i}" } }
  report.check("8 threads x 50 calls, each got its own answer", answers == expected)
end
