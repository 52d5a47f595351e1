# frozen_string_literal: true

# A live workload with history on (spec/web_history_browser_spec.rb): three threads contend for the
# DistMutex "erp-sync" (so they wait), four for the 2-slot ConcurrentLimiter "erp" with a short
# wait_timeout (so some are over the limit); history flushes every 0.5 s. Prints "ready" after the
# first flush wrote something; runs until its stdin closes.
require "ferrolock"

Ferrolock::History.flush_every = 0.5
Ferrolock.configure { |c| c.history = true }
Ferrolock.logger.level = :error
mutex = Ferrolock::DistMutex.new("erp-sync")
limiter = Ferrolock::ConcurrentLimiter.new("erp", 2, wait_timeout: 0.005)
stop = false
workers = Array.new(3) { Thread.new { mutex.synchronize { sleep 0.003 } until stop } }
workers += Array.new(4) do
  Thread.new do
    until stop
      begin
        limiter.within_limit { sleep 0.01 }
      rescue Ferrolock::OverLimit
        sleep 0.002
      end
    end
  end
end
sleep 0.1 until Ferrolock::Admin.new.stats("erp-sync", since: 60)[:primitives].any?
$stdout.puts("ready")
$stdout.flush
$stdin.read # until closed
stop = true
workers.each(&:join)
