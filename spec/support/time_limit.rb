# frozen_string_literal: true

module FerrolockTest
  # Every example runs under a time limit that fails it instead of letting the suite hang: when the
  # limit passes, a watchdog thread raises ExampleTimeLimit::Exceeded in the example's thread; if
  # the example is stuck where no exception reaches it (a native wait that ignores interrupts), the
  # watchdog prints every thread's backtrace and ends the process with status 1 after a grace period.
  #
  # Default: FERROLOCK_EXAMPLE_TIME_LIMIT seconds (120); an example can ask for more or less with
  # `time_limit: seconds` metadata.
  module ExampleTimeLimit
    DEFAULT = Float(ENV.fetch("FERROLOCK_EXAMPLE_TIME_LIMIT", "120"))
    GRACE = 30

    class Exceeded < Exception; end # rubocop:disable Lint/InheritException -- a `rescue => e` in the example must not swallow it

    # An example that took more than this share of its limit is named in the log: the next slow
    # machine may push it over.
    NEAR = 0.6

    def self.run(example)
      limit = example.metadata.fetch(:time_limit, DEFAULT)
      state = { done: false, runner: Thread.current, lock: Thread::Mutex.new, cond: Thread::ConditionVariable.new }
      watchdog = Thread.new { watch(state, limit, example) }
      watchdog.name = "example time limit"
      watchdog.report_on_exception = false
      started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      example.run
      near_limit(example, limit, Process.clock_gettime(Process::CLOCK_MONOTONIC) - started)
    ensure
      state[:lock].synchronize do
        state[:done] = true
        state[:cond].broadcast
      end
      watchdog&.join
    end

    def self.near_limit(example, limit, took)
      return if took <= NEAR * limit

      warn format("\nnear its time limit: %<took>.1f s of %<limit>s s (%<where>s)",
                  took: took, limit: limit, where: example.metadata[:location])
    end

    def self.watch(state, limit, example)
      return if wait_done(state, limit)

      where = example.metadata[:location]
      state[:runner].raise(Exceeded, "example exceeded its time limit of #{limit}s (#{where})")
      return if wait_done(state, GRACE)

      warn "\nFATAL: #{where} is still running #{GRACE}s after its #{limit}s time limit; " \
           "ending the process. Threads:"
      Thread.list.each do |thread|
        warn "--- #{thread.inspect}"
        warn((thread.backtrace || ["(no backtrace)"]).first(30).map { |line| "    #{line}" })
      end
      $stderr.flush
      exit!(1)
    end

    # Waits until the example is done or `seconds` passed; true when it is done.
    def self.wait_done(state, seconds)
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
      state[:lock].synchronize do
        until state[:done]
          left = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
          return false if left <= 0

          state[:cond].wait(state[:lock], left)
        end
      end
      true
    end
  end
end
