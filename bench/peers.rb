# frozen_string_literal: true

require "json"
require "open3"
require "redis"
require "uri"
require_relative "support/contention"
require_relative "support/pinning"
require_relative "support/server_stats"
require_relative "peers/toolchains"

# ferrolock beside other languages' Redis locks, in one run on one throwaway Redis (bin/bench peers;
# not part of the default `bin/bench`, since it installs node, Python and Rust libraries under
# tmp/peers/ first). Every implementation loops acquire, two CLOCK_MONOTONIC timestamps, release,
# on one name: alone (1 worker), then 8 workers in 2 processes and 32 in 4 for a fixed time. Each
# peer's driver (bench/peers/<lang>/) prints its raw spans as one JSON line; the figures are
# computed here the same way for all (Bench::Contention.summarize).
#
# Sections (FERROLOCK_PEERS_SECTION, a comma-separated list; both by default): `empty` (two
# timestamps), and `io`: inside the lock, two round trips (INCR, then DECR) to a SECOND throwaway
# Redis through that language's usual client (redis-rb, ioredis, redis-py, the `redis` crate), so
# every section does the same work; beside the peers, the same section with no lock at all (the
# ceiling, same workers and processes) and the ratios ours / fastest peer and ours / (ceiling ×
# slots / workers), and the same section run back to back by one worker with no lock (a mutex cannot pass
# more sections than that with redis-rb sections). The io section runs the contended configurations only.
#
# Pinned like a deployment (bench/support/pinning.rb): the redis-servers on one CPU, every client
# process on the others. Per implementation: the rate; how long a worker waited for the lock (p50,
# p99, most); the share of hand-offs that went to another worker and to another process; the
# busiest worker's share; the commands clients sent and all those Redis ran (inside scripts too),
# and Redis' CPU, per section (bench/support/server_stats.rb). The 2-round-trip ceiling of a
# lock+unlock cycle (redis-benchmark SET over one connection, halved) is measured in the same run.
module PeersBench
  LEASE_MS = 10_000 # the same lease for everyone (redis-semaphore's and pottery's default)
  LIMIT = 3
  SECONDS = Float(ENV.fetch("FERROLOCK_BENCH_SECONDS", "5"))
  ALONE_SECONDS = [SECONDS / 2, 1.0].max
  # Drivers start their loops together at a CLOCK_MONOTONIC instant this far ahead (interpreters load).
  START_MARGIN = 3.0
  CONFIGS = [[1, 1], *Bench::Contention::CONFIGS].freeze
  # Rounds per row, the best kept (FERROLOCK_PEERS_ROUNDS; the machine's load moves between rows).
  ROUNDS = Integer(ENV.fetch("FERROLOCK_PEERS_ROUNDS", "1"))
  SECTIONS = ENV.fetch("FERROLOCK_PEERS_SECTION", "empty,io").split(",").map { |s| s.strip.to_sym }.freeze
  unless (SECTIONS - %i[empty io]).empty? && !SECTIONS.empty?
    abort "FERROLOCK_PEERS_SECTION: a comma-separated list of empty, io (got #{ENV.fetch("FERROLOCK_PEERS_SECTION")})"
  end
  # Which configurations run, as workers/processes (FERROLOCK_PEERS_CONFIGS="8/2"; all by default).
  ONLY_CONFIGS = ENV["FERROLOCK_PEERS_CONFIGS"]&.split(",")&.map { |c| c.split("/").map { |n| Integer(n) } }
  # Which kinds run (FERROLOCK_PEERS_KINDS="mutex"; both by default), and which peers by their driver
  # name (FERROLOCK_PEERS_ONLY="rslock,redis-semaphore-mutex"; all by default): a quicker run when
  # measuring one change.
  KINDS = ENV.fetch("FERROLOCK_PEERS_KINDS", "mutex,semaphore").split(",").map { |k| k.strip.to_sym }.freeze
  ONLY_PEERS = ENV["FERROLOCK_PEERS_ONLY"]&.split(",")&.map(&:strip)
  CEILING = "the same section, no lock (ceiling)"
  # One worker running the io section back to back: the most a mutex can pass with redis-rb sections.
  SERIAL = "the same section, no lock, one worker in series"

  # kind: :mutex or :semaphore (limit LIMIT); lang: which Toolchains method starts its driver.
  Peer = Struct.new(:label, :lang, :impl, :kind)
  PEERS = [
    Peer.new("rslock 0.10 (Rust)", :rust, "rslock", :mutex),
    Peer.new("redis-semaphore 5.8 Mutex (node)", :node, "redis-semaphore-mutex", :mutex),
    Peer.new("redlock 4.2 (node)", :node, "redlock", :mutex),
    Peer.new("redis-py 8.1 Lock", :python, "redis-py", :mutex),
    Peer.new("python-redis-lock 4.0", :python, "python-redis-lock", :mutex),
    Peer.new("pottery 3.0 Redlock", :python, "pottery", :mutex),
    Peer.new("redis-semaphore 5.8 Semaphore(3) (node)", :node, "redis-semaphore-semaphore", :semaphore)
  ].freeze

  module_function

  def now
    Bench.monotonic
  end

  # { lang => Driver or the reason it is unavailable }.
  def drivers
    @drivers ||= PEERS.map(&:lang).uniq.to_h do |lang|
      [lang, Toolchains.public_send(lang)]
    rescue Toolchains::Unavailable => e
      [lang, e.message]
    end
  end

  # The second Redis the io section talks to: started by `start_io` in the benchmark's own
  # process (a worker's thread in a forked child must never start one: it would outlive the
  # child, which exits without running at_exit), stopped at exit.
  def io_url
    @io_url or raise "PeersBench.start_io first (in the parent process)"
  end

  def start_io
    return if @io_url

    @io_url = Demo::ThrowawayRedis.new.start.url
    Bench::Pinning.server(@io_url)
  end

  def configs(section)
    all = section == :io ? Bench::Contention::CONFIGS : CONFIGS
    ONLY_CONFIGS ? all.select { |c| ONLY_CONFIGS.include?(c) } : all
  end

  # [setup, body]: setup builds a worker's state (a redis-rb connection to the second Redis, or
  # nil); body.call(state) is the section, returning [entered, left].
  def section_body(section, key)
    return [-> {}, ->(_) { [now, now] }] if section == :empty

    # Connected in setup, as the drivers' second connection is (they ping it before start_at).
    [-> { Redis.new(url: io_url).tap(&:ping) },
     lambda do |io|
       entered = now
       io.incr(key)
       io.decr(key)
       [entered, now]
     end]
  end

  # The contended rows' second: the unfair mode (DistMutex / ConcurrentLimiter .new(…, fair: false)).
  UNFAIR = { mutex: "ferrolock DistMutex fair: false", semaphore: "ferrolock ConcurrentLimiter(3) fair: false" }.freeze
  # The uncontended mutex row's second: no fencing tokens (DistMutex.new(…, fencing: false)).
  UNFENCED = "ferrolock DistMutex fencing: false"

  def ours(kind, section, key, fair, fencing: true)
    io_setup, body = section_body(section, "section:#{key}")
    if kind == :mutex
      [lambda do
        [Ferrolock::DistMutex.new("peers:ferrolock:#{key}", lease: LEASE_MS / 1000, fair: fair, fencing: fencing),
         io_setup.call]
      end,
       ->((m, io)) { m.synchronize { body.call(io) } }]
    else
      [lambda do
        [Ferrolock::ConcurrentLimiter.new("peers:limiter:#{key}", LIMIT, wait_timeout: 60,
                                                                         lease: LEASE_MS / 1000, fair: fair),
         io_setup.call]
      end,
       ->((limiter, io)) { limiter.within_limit { body.call(io) } }]
    end
  end

  # How many may be inside at once: a release hands over to the entry that many places later.
  def slots(kind)
    kind == :mutex ? 1 : LIMIT
  end

  def measure_ours(kind, section, workers, processes, fair: true, fencing: true)
    key = "#{section}:#{workers}#{":unfair" unless fair}#{":unfenced" unless fencing}"
    setup, body = ours(kind, section, key, fair, fencing: fencing)
    start_at = now + Bench::Contention::START_MARGIN
    stop_at = start_at + (workers == 1 ? ALONE_SECONDS : SECONDS)
    measured(slots(kind)) do
      Bench::Contention.in_processes(processes, workers / processes, start_at, stop_at, setup, body)
    end.merge(errors: 0)
  end

  # The lock Redis' counters around the block, which returns the spans; their summary, with the
  # commands clients sent per section (:sent) beside all it ran (:commands).
  def measured(slots)
    spans = nil
    delta = server_stats.around { spans = yield }
    raise "no section completed" if spans.empty?

    Bench::Contention.summarize(spans, [delta.total, delta.cpu_seconds], slots)
                     .merge(sent: delta.sent.fdiv(spans.size))
  end

  def server_stats
    @server_stats ||= Bench::ServerStats.new(Bench.redis_url)
  end

  # Two round trips per uncontended lock+unlock: redis-benchmark's SET rate over one connection
  # (from a client CPU, as every client), halved; or why it could not run.
  def round_trip_ceiling
    uri = URI(Bench.redis_url)
    out, status = Open3.capture2e("redis-benchmark", "-h", uri.host, "-p", uri.port.to_s, "-c", "1",
                                  "-n", (SECONDS * 15_000).round.to_s, "-t", "set", "--csv")
    rps = out.lines.find { |l| l.start_with?('"SET"') }&.split(",")&.dig(1)&.delete('"')
    return "redis-benchmark failed: #{out.lines.last&.strip}" unless status.success? && rps

    Float(rps) / 2
  rescue Errno::ENOENT
    "redis-benchmark not found"
  end

  def ceilings
    @ceilings ||= []
  end

  # The io section with no lock around it: every worker runs it back to back.
  def measure_ceiling(workers, processes)
    setup, body = section_body(:io, "section:ceiling:#{workers}")
    result = Bench::Contention.measure(workers: workers, processes: processes, seconds: SECONDS, setup: setup,
                                       section: body, slots: workers)
    # No hand-offs or waits without a lock.
    result.merge(errors: 0, p50_ms: nil, p99_ms: nil, moved: nil, moved_process: nil, wait_p50_ms: nil,
                 wait_p99_ms: nil, wait_max_ms: nil)
  end

  # Starts `processes` drivers with workers / processes workers each on a fresh name.
  def measure_peer(peer, section, workers, processes)
    driver = drivers.fetch(peer.lang)
    key = "peers:#{peer.impl}:#{section}:#{workers}"
    # The drivers' io section: INCR then DECR of this key on this Redis (none: an empty section).
    env = section == :io ? { "FERROLOCK_PEERS_IO_URL" => io_url, "FERROLOCK_PEERS_IO_KEY" => "section:#{key}" } : {}
    start_at = now + START_MARGIN
    stop_at = start_at + (workers == 1 ? ALONE_SECONDS : SECONDS)
    outputs = nil
    measured(slots(peer.kind)) do
      outputs = Array.new(processes) do |p|
        args = [peer.impl, Bench.redis_url, key, workers / processes, p, start_at, stop_at, LEASE_MS, LIMIT]
        args.pop unless peer.kind == :semaphore
        spawn_driver(driver, args.map(&:to_s), env)
      end.map(&:value)
      outputs.flat_map { |o| o.fetch("spans") }
    end.merge(errors: outputs.sum { |o| o.fetch("errors") })
  rescue RuntimeError => e
    raise "#{peer.label}, #{workers}/#{processes}: #{e.message}"
  end

  # A thread that returns the driver's parsed JSON line (or raises with its stderr).
  def spawn_driver(driver, args, env)
    Thread.new do
      out, err, status = Open3.capture3(driver.env.merge(env), *driver.argv, *args)
      raise "#{driver.argv.last} #{args.first} failed (#{status}): #{err.lines.last(5).join}" unless status.success?

      JSON.parse(out.lines.last)
    end
  end

  # [[label, config, result or reason], ...] for one kind, ours first in each config (the io
  # section's ceiling last): of ROUNDS rounds (each runs every row in turn), the round with the most
  # sections per row.
  def results(kind, section)
    start_io if section == :io
    Array.new(ROUNDS) { one_round(kind, section) }.transpose.map do |runs|
      label, config, = runs.first
      measured = runs.map(&:last).reject { |result| result.is_a?(String) }
      [label, config, measured.max_by { |result| result[:sections] } || runs.first.last]
    end
  end

  def one_round(kind, section)
    peers = PEERS.select { |peer| peer.kind == kind && (ONLY_PEERS.nil? || ONLY_PEERS.include?(peer.impl)) }
    configs(section).flat_map do |workers, processes|
      ours_label = kind == :mutex ? "ferrolock DistMutex" : "ferrolock ConcurrentLimiter(3)"
      ceiling = if section == :io
                  [[CEILING, [workers, processes], measure_ceiling(workers, processes)],
                   [SERIAL, [workers, processes], measure_ceiling(1, 1)]]
                else
                  []
                end
      unfair = if workers > 1
                 [[UNFAIR.fetch(kind), [workers, processes],
                   measure_ours(kind, section, workers, processes, fair: false)]]
               elsif kind == :mutex
                 [[UNFENCED, [workers, processes], measure_ours(kind, section, workers, processes, fencing: false)]]
               end
      [[ours_label, [workers, processes], measure_ours(kind, section, workers, processes)], *unfair] +
        peers.map { |peer| [peer.label, [workers, processes], peer_result(peer, section, workers, processes)] } +
        ceiling
    end
  end

  def peer_result(peer, section, workers, processes)
    driver = drivers.fetch(peer.lang)
    return "skipped: #{driver}" if driver.is_a?(String)

    measure_peer(peer, section, workers, processes)
  end
end

require_relative "peers/report"

Bench.define("peers") do
  notes = PeersBench.drivers.filter_map { |lang, d| "- #{lang} peers skipped: #{d}" if d.is_a?(String) }
  # After the drivers are built (on every CPU): this process and all it starts on the client CPUs.
  pinning = Bench::Pinning.start
  Bench::Pinning.server(Bench.redis_url)
  PeersBench.ceilings << PeersBench.round_trip_ceiling
  tables = PeersBench::SECTIONS.flat_map do |section|
    PeersBench::KINDS.map { |kind| PeersBench::Report.tables(kind, section, PeersBench.results(kind, section)) }
  end
  PeersBench.ceilings << PeersBench.round_trip_ceiling
  runs = "- Each row: the best of #{PeersBench::ROUNDS} round(s) (by sections/s); contended runs last " \
         "#{PeersBench::SECONDS} s, the lone worker's #{PeersBench::ALONE_SECONDS} s."
  [[PeersBench::Report.header(pinning, PeersBench.ceilings), *notes].join("\n"), *tables,
   "#{PeersBench::Report::NOTES}\n#{runs}"].join("\n\n")
end
