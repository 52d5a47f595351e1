# frozen_string_literal: true

# What holder metadata costs: uncontended DistMutex lock + unlock cycles per second with tokens
# carrying their holder (`<hex>~host~pid~tid~fid~ms`, the default) and with bare 32-hex tokens
# (Native::Admin.holder_metadata = false, a switch for this benchmark only). Rounds alternate
# in one run, so both see the same machine load; the median of each is reported.
Bench.define("holder_metadata") do
  client = Ferrolock::Client.new(url: Bench.redis_url)
  mutex = Ferrolock::DistMutex.new("bench:holder", client: client)
  table = Bench::Table.new("uncontended lock + unlock, 1 thread", ours: "with holder", baseline: "bare token")
  with = []
  without = []
  5.times do
    [[true, with], [false, without]].each do |on, results|
      Ferrolock::Native::Admin.holder_metadata = on
      results << Bench.ops_per_second(ops: 5_000) { mutex.synchronize { nil } }
    end
  end
  table.add("cycles/s (median of 5)", ours: Bench.median(with), baseline: Bench.median(without))
  table
ensure
  Ferrolock::Native::Admin.holder_metadata = true
end
