# frozen_string_literal: true

require "sidekiq"

RSpec.describe FerrolockTest::SidekiqProcess do
  it "runs a real Sidekiq server against the test Redis" do
    Sidekiq.configure_client { |c| c.redis = { url: FerrolockTest.redis_server.url } }
    with_sidekiq("spec/fixtures/sidekiq_app.rb", concurrency: 2) do |sidekiq|
      Sidekiq::Client.push("class" => "FerrolockProbeJob", "args" => ["hello"], "queue" => "default")
      pid = wait_until(timeout: 10) { FerrolockTest.redis_server.redis.get("probe:hello") }
      expect(pid.to_i).to eq(sidekiq.pid)
    end
  end
end
