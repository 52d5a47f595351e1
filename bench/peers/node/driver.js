// node driver for bench/peers.rb:
//   node driver.js <impl> <url> <key> <workers> <process> <start_at> <stop_at> <lease_ms> [limit]
// impl: redis-semaphore-mutex | redis-semaphore-semaphore | redlock.
// "N workers in one process" = N async loops in this one node process sharing one ioredis
// connection (node's idiomatic concurrency; ioredis pipelines their commands). Each loop
// acquires, takes two timestamps, releases, from start_at to stop_at (CLOCK_MONOTONIC seconds:
// process.hrtime.bigint() reads it on Linux, so processes of every language compare).
// Prints one JSON line: {"spans":[[entered,left,"process.worker",asked],...],"errors":n} (asked: when
// the loop began wanting the lock, its failed tries included).
// With FERROLOCK_PEERS_IO_URL set, the section is INCR then DECR of FERROLOCK_PEERS_IO_KEY on that
// (second) Redis through a second ioredis connection the loops share, like the lock's.
"use strict";

const Redis = require("ioredis");

const [impl, url, key, workersArg, processArg, startArg, stopArg, leaseArg, limitArg] = process.argv.slice(2);
const workers = Number(workersArg);
const startAt = Number(startArg);
const stopAt = Number(stopArg);
const leaseMs = Number(leaseArg);
const limit = Number(limitArg || 1);

const ioUrl = process.env.FERROLOCK_PEERS_IO_URL;
const ioKey = process.env.FERROLOCK_PEERS_IO_KEY;

const monotonic = () => Number(process.hrtime.bigint()) / 1e9;

// Library defaults except the lease, which is the same for every implementation:
// redis-semaphore retries every 10 ms for up to 10 s (acquireTimeout) and refreshes at 80 % of
// the lease; redlock tries 10 times, 200 ms apart with up to 200 ms jitter, then throws.
function makeLock(client) {
  if (impl === "redlock") {
    const Redlock = require("redlock");
    const redlock = new Redlock([client]);
    return {
      acquire: () => redlock.lock(key, leaseMs),
      release: (lock) => lock.unlock(),
    };
  }
  const { Mutex, Semaphore } = require("redis-semaphore");
  const make =
    impl === "redis-semaphore-mutex"
      ? () => new Mutex(client, key, { lockTimeout: leaseMs })
      : () => new Semaphore(client, key, limit, { lockTimeout: leaseMs });
  return {
    acquire: async () => {
      const lock = make();
      await lock.acquire();
      return lock;
    },
    release: (lock) => lock.release(),
  };
}

async function worker(id, lock, io) {
  const spans = [];
  let errors = 0;
  let asked = monotonic();
  while (monotonic() < stopAt) {
    let held;
    try {
      held = await lock.acquire();
    } catch (_e) {
      errors += 1; // redlock out of tries, redis-semaphore's acquireTimeout: try again
      continue;
    }
    const entered = monotonic();
    if (io) {
      await io.incr(ioKey);
      await io.decr(ioKey);
    }
    const left = monotonic();
    await lock.release(held);
    spans.push([entered, left, `${processArg}.${id}`, asked]);
    asked = monotonic();
  }
  return { spans, errors };
}

async function main() {
  const client = new Redis(url);
  await client.ping();
  const io = ioUrl ? new Redis(ioUrl) : null;
  if (io) await io.ping();
  const lock = makeLock(client);
  const wait = Math.max(0, startAt - monotonic());
  await new Promise((resolve) => setTimeout(resolve, wait * 1000));
  const results = await Promise.all(Array.from({ length: workers }, (_, i) => worker(i, lock, io)));
  const out = { spans: results.flatMap((r) => r.spans), errors: results.reduce((n, r) => n + r.errors, 0) };
  process.stdout.write(`${JSON.stringify(out)}\n`);
  client.disconnect();
  if (io) io.disconnect();
}

main().catch((e) => {
  process.stderr.write(`${e.stack || e}\n`);
  process.exit(1);
});
