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
    stop_history_thread if @history_thread_quieted # the next event restarts it at the usual cadence
    Ferrolock::History.flush_every = Ferrolock::History::FLUSH_EVERY
    Ferrolock.configure { |c| c.history = false }
  end

  # For an example that reads one flush's exact keys and counts: neither a flush of the thread's nor a
  # new minute comes before its own flush!. The thread, stopped, restarts with the next event to sleep
  # until the minute's end, which is then at least 10 s away (an example takes milliseconds).
  def quiet_history_thread
    left = 60 - (Process.clock_gettime(Process::CLOCK_REALTIME) % 60)
    sleep(left + 0.5) if left < 10
    Ferrolock::History.flush_every = 3600
    stop_history_thread
    @history_thread_quieted = true
  end

  # The flush thread found by its name (History starts it again with the next event).
  def stop_history_thread
    Thread.list.select { |t| t.name == "ferrolock-history" }.each { |t| t.kill.join }
  end
end
