# frozen_string_literal: true

# bin/bench shoryuken-sqs (runs in the modern root: Shoryuken 7 needs Ruby >= 3.2): messages/s through a
# REAL Shoryuken 7.0.3 process (vendored; its fetcher, processor and default server chain, 10 threads)
# consuming a real SQS server (moto, one server for the whole run), a worker that only records when it
# ran, with and without Ferrolock::Shoryuken::LockMiddleware (before AutoDelete, as the README says).
# Alternating rounds on fresh queues, best round of each. The rate is from the first to the last run
# recorded (the process's boot is not counted). moto is a Python server: it, not the chain, is likely the
# bound, so the overhead per message is the figure to read.
require "etc"
require "ferrolock"
require_relative "../spec/support/shoryuken_sqs"

module ShoryukenSqsBench
  MESSAGES = Integer(ENV.fetch("FERROLOCK_BENCH_SQS_MESSAGES", "400"))
  ROUNDS = Integer(ENV.fetch("FERROLOCK_BENCH_SQS_ROUNDS", "2"))
  CONCURRENCY = 10

  module_function

  # Messages/s of one round: MESSAGES on a fresh queue, one Shoryuken process.
  def round(run, redis, name, lock)
    queue = "bench-#{name}-#{SecureRandom.hex(3)}"
    url = run.queue(queue, VisibilityTimeout: 60)
    run.send_bodies(url, Array.new(MESSAGES) { |i| { id: "#{queue}-#{i}", bench: true } })
    redis.del("rec:bench")
    run.shoryuken({ queue => { "lock" => lock } }, concurrency: CONCURRENCY)
    run.wait_for("#{MESSAGES} messages run", timeout: Integer(ENV.fetch("FERROLOCK_BENCH_SQS_TIMEOUT", "300")),
                                             every: 0.5) do
      redis.llen("rec:bench") >= MESSAGES
    end
    times = redis.lrange("rec:bench", 0, -1).map(&:to_f).sort
    run.wait_for("every message deleted", timeout: 60) { run.depth(url) == [0, 0] }
    run.stop_processes
    (times.size - 1) / (times.last - times.first)
  end

  def main
    reason = FerrolockTest::ShoryukenSqs.missing
    abort "bin/bench shoryuken-sqs: #{reason}" if reason

    server = FerrolockTest::RedisServer.new.start
    run = FerrolockTest::ShoryukenSqs::Run.new(server)
    rates = { without: [], with: [] }
    ROUNDS.times do
      rates[:without] << round(run, server.redis, "none", false)
      rates[:with] << round(run, server.redis, "lock", true)
    end
    report(rates)
  ensure
    run&.close
    server&.destroy
  end

  def report(rates)
    without = rates[:without].max
    with = rates[:with].max
    wall_ms = ((1.0 / with) - (1.0 / without)) * 1000
    puts "ferrolock #{Ferrolock::VERSION}: Shoryuken 7.0.3 against moto (one server), " \
         "#{RUBY_DESCRIPTION.split(" [").first}, #{Etc.nprocessors} cores"
    puts "#{MESSAGES} messages a round, #{ROUNDS} rounds of each, alternating; 1 process x #{CONCURRENCY} threads"
    puts
    puts "| chain | messages/s (best round) | every round |"
    puts "| --- | ---: | --- |"
    puts "| default chain, no lock | #{without.round(1)} | #{rates[:without].map { |r| r.round(1) }.join(", ")} |"
    puts "| with LockMiddleware | #{with.round(1)} | #{rates[:with].map { |r| r.round(1) }.join(", ")} |"
    puts
    puts "ratio (with / without): #{(with / without).round(3)}"
    puts "overhead per message: #{wall_ms.round(3)} ms of wall time " \
         "(#{(wall_ms * CONCURRENCY).round(2)} ms of a thread's time at #{CONCURRENCY} threads)" \
         "#{"; below the rounds' spread: not measurable here" if wall_ms.abs < spread_ms(rates)}"
  end

  # How far apart the rounds of one chain were, in ms per message (the noise of this machine and of moto).
  def spread_ms(rates)
    rates.values.map { |list| ((1.0 / list.min) - (1.0 / list.max)) * 1000 }.max
  end
end

ShoryukenSqsBench.main if File.expand_path($PROGRAM_NAME) == File.expand_path(__FILE__)
