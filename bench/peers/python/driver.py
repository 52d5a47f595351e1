"""python driver for bench/peers.rb.

    python driver.py <impl> <url> <key> <workers> <process> <start_at> <stop_at> <lease_ms>

impl: redis-py | python-redis-lock | pottery. Each worker is a thread (the GIL lets one run
Python at a time; these libraries are thread-safe and threads are how they are used) with its own
Redis connection and lock object, looping acquire + release on one name from start_at to stop_at
(time.monotonic() is CLOCK_MONOTONIC on Linux, shared by every process). Prints one JSON line:
{"spans": [[entered, left, "process.worker", asked], ...], "errors": n} (asked: when the worker began
wanting the lock, its failed tries included).
With FERROLOCK_PEERS_IO_URL set, the section is INCR then DECR of FERROLOCK_PEERS_IO_KEY on that
(second) Redis, through the worker's own second redis-py connection.
"""

import json
import os
import sys
import threading
import time

import redis

IMPL, URL, KEY = sys.argv[1], sys.argv[2], sys.argv[3]
WORKERS, PROCESS = int(sys.argv[4]), sys.argv[5]
START_AT, STOP_AT = float(sys.argv[6]), float(sys.argv[7])
LEASE = int(sys.argv[8]) / 1000.0
IO_URL = os.environ.get("FERROLOCK_PEERS_IO_URL")
IO_KEY = os.environ.get("FERROLOCK_PEERS_IO_KEY")


def make_lock(conn):
    """Library defaults except the lease (the same for every implementation)."""
    if IMPL == "redis-py":
        # Retries SET NX every 0.1 s (sleep=0.1), waits forever (blocking_timeout=None).
        return conn.lock(KEY, timeout=LEASE)
    if IMPL == "python-redis-lock":
        import redis_lock

        # SET NX EX, then BLPOP on a signal list the release pushes to.
        return redis_lock.Lock(conn, KEY, expire=int(LEASE))
    if IMPL == "pottery":
        from pottery import Redlock

        # Retries after a random 0-0.2 s pause.
        return Redlock(key=KEY, masters={conn}, auto_release_time=LEASE)
    raise SystemExit(f"unknown impl {IMPL}")


def worker(index, out):
    conn = redis.Redis.from_url(URL)
    conn.ping()
    lock = make_lock(conn)
    io = redis.Redis.from_url(IO_URL) if IO_URL else None
    if io:
        io.ping()
    spans = []
    errors = 0
    time.sleep(max(0.0, START_AT - time.monotonic()))
    asked = time.monotonic()
    while time.monotonic() < STOP_AT:
        if not lock.acquire():
            errors += 1
            continue
        entered = time.monotonic()
        if io:
            io.incr(IO_KEY)
            io.decr(IO_KEY)
        left = time.monotonic()
        lock.release()
        spans.append([entered, left, f"{PROCESS}.{index}", asked])
        asked = time.monotonic()
    out[index] = (spans, errors)


def main():
    out = [None] * WORKERS
    threads = [threading.Thread(target=worker, args=(i, out)) for i in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    spans = [s for result in out for s in result[0]]
    print(json.dumps({"spans": spans, "errors": sum(result[1] for result in out)}))


main()
