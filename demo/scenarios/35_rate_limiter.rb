# frozen_string_literal: true

require "json"

# A partner API allowing 20 calls a second, shared by 2 processes x 4 threads. Each call records the
# Redis time its script counted it at (the :acquired event's granted_at), so the checks read the
# limiter's own clock, not each process's.
module RateLimiterDemo
  PROCESSES = 2
  THREADS = 4
  SECONDS = 3

  module_function

  # Every call's granted_at (Redis seconds) from PROCESSES x THREADS callers looping for SECONDS.
  def grants(limiter)
    children = Array.new(PROCESSES) do
      reader, writer = IO.pipe
      pid = fork do
        reader.close
        writer.puts(JSON.generate(calls_in_threads(limiter)))
        writer.close
        exit!(0)
      end
      writer.close
      [pid, reader]
    end
    grants = children.flat_map { |_, reader| JSON.parse(reader.read) }
    children.each { |pid, _| Process.wait(pid) } # not waitall: the throwaway redis-server is a child too
    grants.sort
  end

  def calls_in_threads(limiter)
    granted = Queue.new
    sub = Ferrolock.subscribe(:acquired) do |_, payload|
      granted << payload[:granted_at] if payload[:name] == limiter.name
    end
    stop_at = Demo.monotonic + SECONDS
    Array.new(THREADS) { Thread.new { limiter.within_limit { nil } while Demo.monotonic < stop_at } }.each(&:join)
    Ferrolock.unsubscribe(sub)
    Array.new(granted.size) { granted.pop }
  end
end

Demo.scenario("RateLimiter: 20 calls/s shared by 2 processes x 4 threads, counted in Redis time") do |report|
  client = Demo.client(namespace: "demo-rate-#{Process.pid}")
  report.line("setup", "#{RateLimiterDemo::PROCESSES} processes x #{RateLimiterDemo::THREADS} threads, " \
                       "#{RateLimiterDemo::SECONDS} s per limiter")

  window = Ferrolock::RateLimiter.window("partner-api", 10, 0.5, client: client)
  calls = RateLimiterDemo.grants(window)
  per_window = calls.group_by { |t| (t / 0.5).floor }.values.map(&:size)
  report.line("window 10 per 0.5 s: calls per window", per_window.minmax.join(".."))
  report.check("never more than 10 in a window", per_window.max <= 10,
               "#{calls.size} calls in #{RateLimiterDemo::SECONDS} s")

  leaky = Ferrolock::RateLimiter.leaky("partner-api-even", 20, 1, client: client)
  calls = RateLimiterDemo.grants(leaky)
  gaps = calls.each_cons(2).map { |a, b| b - a }
  report.line("leaky 20/s: smallest / median gap", "#{report.ms(gaps.min)} / #{report.ms(gaps.sort[gaps.size / 2])}")
  report.check("calls evenly spaced, >= 50 ms apart", gaps.min >= 0.0499, "#{calls.size} calls")

  begin
    # One call a minute: the second call's slot is ~60 s away, far past wait_timeout.
    Ferrolock::RateLimiter.leaky("partner-api-full", 1, 60, wait_timeout: 1, client: client).tap do |full|
      full.within_limit { nil }
      full.within_limit { nil }
    end
    report.check("OverLimit when the next slot is past wait_timeout", false)
  rescue Ferrolock::OverLimit => e
    report.check("OverLimit at once when the next slot is past wait_timeout", e.retry_after > 50,
                 "retry_after #{e.retry_after.round(1)} s (a middleware reschedules the job for then)")
  end
end
