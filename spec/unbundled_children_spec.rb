# frozen_string_literal: true

# Some children run outside Bundler (Shoryuken's and WEBrick's gems are not in the Gemfile). Starting
# them must leave this process's ENV alone, as every thread shares it: in one CI run, three scenario
# threads' Bundler.with_unbundled_env overlapped, the last to end put back the ENV without
# REDIS_URL, and Sidekiq's pool, built next, asked localhost:6379 for the rest of the run.
RSpec.describe "children started outside Bundler" do
  it "get the environment rspec started with plus theirs, and leave ENV alone, three threads at once" do
    url = ENV.fetch("REDIS_URL")
    unseen = 0
    watching = true
    watcher = Thread.new do
      while watching
        unseen += 1 unless ENV["REDIS_URL"] == url
        Thread.pass
      end
    end
    code = 'print ENV.key?("BUNDLE_GEMFILE"), " ", ENV.fetch("REDIS_URL"), " ", ENV.fetch("CHILD")'
    outs = Array.new(3) do |i|
      Thread.new { run_ruby!(code, env: { "CHILD" => i.to_s }, unbundled: true) }
    end.map(&:value)
    watching = false
    watcher.join
    expect(outs).to eq(Array.new(3) { |i| "false #{url} #{i}" })
    expect(unseen).to eq(0)
  end
end
