# frozen_string_literal: true

# History switched on for each example (the suite runs with it off, FERROLOCK_HISTORY=0), with nothing
# of an earlier example's: its counts flushed, then every {history} key of the test Redis deleted.
# Off again after, flushing every FLUSH_EVERY seconds (an example may shorten it).
RSpec.shared_context "with history on" do
  around do |example|
    Ferrolock.configure { |c| c.history = true }
    Ferrolock::History.flush!
    redis = FerrolockTest.redis_server.redis
    redis.keys("ferrolock:{history}:*").each { |key| redis.del(key) }
    example.run
  ensure
    Ferrolock::History.flush_every = Ferrolock::History::FLUSH_EVERY
    Ferrolock.configure { |c| c.history = false }
  end
end
