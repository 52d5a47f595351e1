# frozen_string_literal: true

require "json"

# What the ActiveSupport::Notifications bridge (Ferrolock::Notifications) costs when nobody listens:
# Ferrolock.instrument's ns per call and DistMutex's uncontended lock+unlock per second (history
# off: no subscriber of any kind), in a child
# without ActiveSupport and in one that loaded ActiveSupport::Notifications but has no listener for
# ferrolock's names (a Rails app with no APM, or one watching other names). Each round runs the two
# children one after the other; best of ROUNDS.
module NotificationsBench
  ROUNDS = 3
  CALLS = 200_000
  CYCLES = 10_000

  module_function

  def measure(load_active_support)
    read, write = IO.pipe
    pid = fork do
      read.close
      Ferrolock.configure { |c| c.history = false } # no subscriber at all: history is one
      if load_active_support
        require "active_support/notifications"
        # A listener for another name: the notifier is in use, ferrolock's names have none.
        ActiveSupport::Notifications.subscribe("sql.active_record") { nil }
      end
      write.write(JSON.dump(sample))
      exit!(0)
    end
    write.close
    result = JSON.parse(read.read)
    Process.wait(pid)
    result
  end

  def sample
    payload = { primitive: :dist_mutex, name: "bench", waited: 0.0 }
    started = Bench.monotonic
    CALLS.times { Ferrolock.instrument(:acquired, payload) }
    ns = (Bench.monotonic - started) * 1e9 / CALLS
    mutex = Ferrolock::DistMutex.new("bench:notifications")
    { "ns" => ns, "ops" => Bench.ops_per_second(ops: CYCLES) { mutex.synchronize { nil } } }
  end
end

Bench.define("notifications") do
  rounds = Array.new(NotificationsBench::ROUNDS) { [false, true].map { |load| NotificationsBench.measure(load) } }
  without = rounds.map(&:first)
  with = rounds.map(&:last)
  best_ns = ->(list) { list.map { |r| r["ns"] }.min }
  best_ops = ->(list) { list.map { |r| r["ops"] }.max }
  [
    "| nobody listening (best of #{NotificationsBench::ROUNDS}) | no ActiveSupport | " \
    "ActiveSupport::Notifications loaded | ratio |",
    "|---|---:|---:|---:|",
    format("| Ferrolock.instrument(:acquired, payload), ns per call | %.0f | %.0f | %.2fx |",
           best_ns.call(without), best_ns.call(with), best_ns.call(with) / best_ns.call(without)),
    format("| DistMutex uncontended lock+unlock, cycles/s | %s | %s | %.3fx |", Bench.number(best_ops.call(without)),
           Bench.number(best_ops.call(with)), best_ops.call(with) / best_ops.call(without))
  ].join("\n")
end
