//! Every primitive on a real 3-master Redis Cluster: routing by slot, BLPOP wake-ups and their
//! CLIENT UNBLOCK on the owning node, batched renewals per node, a slot migrated live, and a
//! master killed and replaced by its replica.

#[path = "../support/cluster.rs"]
mod cluster_support;

use cluster_support::{query, wait_until, TestCluster, NODE_TIMEOUT_MS};
use ferrolock_core::concurrent_limiter::{ConcurrentLimiter, LimiterOptions};
use ferrolock_core::fair_tenant::{check, Enqueue, Mode, Rule, Rules};
use ferrolock_core::message_lock::{Begin, Finish, MessageLock, MessageLockOptions};
use ferrolock_core::transport::slot::key_slot;
use ferrolock_core::{Client, ClientOptions, Error, Interrupt};
use ferrolock_core::{DistMutex, DistMutexOptions};
use ferrolock_core::{DualLock, DualLockOptions, Stage};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn client(cluster: &TestCluster, namespace: &str) -> Client {
    let mut opts = ClientOptions::new("redis://unused:1");
    // One seed is enough; the others are found through CLUSTER SLOTS.
    opts.cluster = vec![cluster.urls()[0].clone()];
    opts.namespace = namespace.to_string();
    Client::new(opts).unwrap()
}

fn lock_key(namespace: &str, name: &str) -> String {
    format!("{namespace}:{{{name}}}:lock")
}

/// Names whose keys live on every master (asserted, so the spread is not left to chance).
fn spread_names(cluster: &TestCluster, namespace: &str) -> Vec<String> {
    let mut owners = BTreeSet::new();
    let mut names = Vec::new();
    for i in 0.. {
        let name = format!("n{i}");
        if owners.insert(cluster.owner_of(key_slot(lock_key(namespace, &name).as_bytes()))) {
            names.push(name);
        }
        if owners.len() == 3 {
            return names;
        }
        assert!(i < 1000, "keys do not reach 3 masters");
    }
    unreachable!()
}

fn mutex(client: &Client, name: &str, lease_ms: u64) -> DistMutex {
    let opts = DistMutexOptions {
        fair: true,
        expire: None,
        auto_release: true,
        lease: Duration::from_millis(lease_ms),
        ..DistMutexOptions::default()
    };
    DistMutex::new(client, name, opts).unwrap()
}

#[test]
fn slots_match_the_server() {
    let cluster = TestCluster::shared();
    for i in 0..200 {
        let key = if i % 2 == 0 {
            format!("key:{i}")
        } else {
            format!("ns:{{tag{i}}}:lock")
        };
        let theirs: i64 = query(cluster.ports[0], &["CLUSTER", "KEYSLOT", &key]).unwrap();
        assert_eq!(key_slot(key.as_bytes()) as i64, theirs, "{key}");
    }
}

#[test]
fn every_primitive_works_on_every_master() {
    let cluster = TestCluster::shared();
    let ns = "prims";
    // One namespace per primitive: the same names (so the same slots), different keys.
    let [cm, cd, cl, cf, cml] =
        ["m", "d", "l", "f", "ml"].map(|p| client(cluster, &format!("{ns}-{p}")));
    let intr = Interrupt::new();
    let names = spread_names(cluster, ns);
    for name in &names {
        // DistMutex, with a waiter woken by BLPOP (and CLIENT UNBLOCK) on the owning master.
        let m = mutex(&cm, name, 5_000);
        let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
        assert!(m.is_locked(&intr).unwrap());
        let waiter = {
            let m = mutex(&cm, name, 5_000);
            std::thread::spawn(move || {
                let intr = Interrupt::new();
                let deadline = Instant::now() + Duration::from_secs(20);
                let held = m
                    .lock(&intr, &DistMutex::new_token(), Some(deadline))
                    .unwrap();
                m.unlock(&intr, held).unwrap();
            })
        };
        std::thread::sleep(Duration::from_millis(150));
        m.unlock(&intr, held).unwrap();
        waiter.join().unwrap();
        assert!(!m.is_locked(&intr).unwrap());

        // min_replicas_acked: EVALSHA + WAIT on the owning master, acknowledged by its replica.
        let acked = mutex(&cm, name, 5_000).with_min_replicas_acked(1);
        let held = acked.lock(&intr, &DistMutex::new_token(), None).unwrap();
        acked.unlock(&intr, held).unwrap();

        // DualLock: one runs, the next waits, the third skips.
        let opts = DualLockOptions {
            wait_lease: Duration::from_secs(5),
            lease: Duration::from_secs(5),
        };
        let d = DualLock::new(&cd, name, opts).unwrap();
        let a = d.enter(&intr, &DualLock::new_token()).unwrap();
        let mut b = d.enter(&intr, &DualLock::new_token()).unwrap();
        let skip = d.enter(&intr, &DualLock::new_token()).unwrap();
        assert_eq!(
            (a.stage(), b.stage(), skip.stage()),
            (Stage::Running, Stage::Waiting, Stage::Skipped)
        );
        assert_eq!(d.state(&intr).unwrap(), (true, true));
        d.leave(&intr, a).unwrap();
        assert_eq!(d.wait(&intr, &mut b, None).unwrap(), Stage::Running);
        d.leave(&intr, b).unwrap();

        // ConcurrentLimiter: two slots, the third caller waits for one.
        let opts = LimiterOptions {
            limit: 2,
            lease: Duration::from_secs(5),
            local_passes: 0,
            fair: true,
        };
        let l = ConcurrentLimiter::new(&cl, name, opts).unwrap();
        let s1 = l.acquire(&intr, &ConcurrentLimiter::new_token(), Instant::now());
        let s2 = l.acquire(&intr, &ConcurrentLimiter::new_token(), Instant::now());
        let (s1, s2) = (s1.unwrap().unwrap(), s2.unwrap().unwrap());
        assert!(l
            .acquire(&intr, &ConcurrentLimiter::new_token(), Instant::now())
            .unwrap()
            .is_none());
        assert_eq!(l.status(&intr).unwrap().in_use, 2);
        l.release(&intr, s1).unwrap();
        l.release(&intr, s2).unwrap();

        // FairTenant: the tenant is the hash tag.
        let rules = Rules::new(&[Rule {
            threshold: 1,
            per: Duration::from_secs(60),
        }])
        .unwrap();
        let got: Vec<usize> = (0..3)
            .map(|i| {
                let e = Enqueue {
                    job_class: "Job",
                    tenant: name,
                    jid: &format!("j{i}"),
                    mode: Mode::Exact,
                    record: true,
                };
                check(&cf, &intr, &rules, &e).unwrap()
            })
            .collect();
        assert_eq!(got, vec![0, 1, 1]);

        // MessageLock: run once, then processed.
        let opts = MessageLockOptions {
            lease: Duration::from_secs(5),
            processed_ttl: Duration::from_secs(60),
        };
        let ml = MessageLock::new(&cml, opts).unwrap();
        let Begin::Run(running) = ml
            .begin(&intr, name, "m1", &MessageLock::new_token())
            .unwrap()
        else {
            panic!("expected to run");
        };
        assert!(matches!(
            ml.begin(&intr, name, "m1", &MessageLock::new_token())
                .unwrap(),
            Begin::InProgress
        ));
        assert_eq!(ml.finish(&intr, running).unwrap(), Finish::Marked);
        assert!(matches!(
            ml.begin(&intr, name, "m1", &MessageLock::new_token())
                .unwrap(),
            Begin::Processed
        ));
    }
}

#[test]
fn leases_on_every_master_are_renewed_in_one_batch_per_node() {
    let cluster = TestCluster::shared();
    let ns = "leases";
    let c = client(cluster, ns);
    let intr = Interrupt::new();
    let names = spread_names(cluster, ns);
    // Held for 4 leases: only the watchdog's renewals keep them.
    let held: Vec<_> = names
        .iter()
        .map(|n| {
            let m = mutex(&c, n, 300);
            let h = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
            (m, h)
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1_200));
    for (m, h) in held {
        assert!(m.is_locked(&intr).unwrap());
        m.unlock(&intr, h).unwrap();
    }
}

/// 8 threads take turns; `inside` counts holders, `max` must stay 1.
struct Exclusion {
    inside: AtomicUsize,
    max: AtomicUsize,
    sections: AtomicUsize,
}

impl Exclusion {
    fn new() -> Arc<Exclusion> {
        Arc::new(Exclusion {
            inside: AtomicUsize::new(0),
            max: AtomicUsize::new(0),
            sections: AtomicUsize::new(0),
        })
    }

    fn section(&self) {
        let now = self.inside.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(2));
        self.inside.fetch_sub(1, Ordering::SeqCst);
        self.sections.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn threads_exclude_each_other_on_a_cluster() {
    let cluster = TestCluster::shared();
    let c = client(cluster, "excl");
    let ex = Exclusion::new();
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let m = mutex(&c, "x", 5_000);
            let ex = ex.clone();
            std::thread::spawn(move || {
                let intr = Interrupt::new();
                for _ in 0..25 {
                    let deadline = Instant::now() + Duration::from_secs(30);
                    let h = m
                        .lock(&intr, &DistMutex::new_token(), Some(deadline))
                        .unwrap();
                    ex.section();
                    m.unlock(&intr, h).unwrap();
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!(ex.max.load(Ordering::SeqCst), 1);
    assert_eq!(ex.sections.load(Ordering::SeqCst), 200);
}

#[test]
fn a_slot_migrated_live_keeps_exclusion_without_errors() {
    let cluster = TestCluster::shared();
    let ns = "migr";
    let c = client(cluster, ns);
    let slot = key_slot(lock_key(ns, "moving").as_bytes());
    let src = cluster.owner_of(slot);
    let dst = cluster
        .masters()
        .into_iter()
        .map(|(p, _)| p)
        .find(|&p| p != src)
        .unwrap();
    let ex = Exclusion::new();
    let stop = Arc::new(AtomicBool::new(false));
    let errors = Arc::new(Mutex::new(Vec::new()));
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let m = mutex(&c, "moving", 5_000);
            let (ex, stop, errors) = (ex.clone(), stop.clone(), errors.clone());
            std::thread::spawn(move || {
                let intr = Interrupt::new();
                while !stop.load(Ordering::SeqCst) {
                    let deadline = Instant::now() + Duration::from_secs(30);
                    let run = m
                        .lock(&intr, &DistMutex::new_token(), Some(deadline))
                        .and_then(|h| {
                            ex.section();
                            m.unlock(&intr, h)
                        });
                    if let Err(e) = run {
                        errors.lock().unwrap().push(e);
                    }
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let before = ex.sections.load(Ordering::SeqCst);
    let t = Instant::now();
    migrate(cluster, slot, src, dst);
    eprintln!("migration took {:?}", t.elapsed());
    assert_eq!(cluster.owner_of(slot), dst);
    let moved_at = ex.sections.load(Ordering::SeqCst);
    // Waiters blocked on the old owner are redirected by Redis' cron (within ~1 s).
    std::thread::sleep(Duration::from_millis(2_500));
    stop.store(true, Ordering::SeqCst);
    threads.into_iter().for_each(|t| t.join().unwrap());
    let after = ex.sections.load(Ordering::SeqCst);
    eprintln!("migration: {before} sections before, {moved_at} at the move, {after} in all");
    assert_eq!(*errors.lock().unwrap(), Vec::<Error>::new());
    assert_eq!(ex.max.load(Ordering::SeqCst), 1);
    assert!(after > moved_at, "no work after the migration");
}

/// Moves `slot` from `src` to `dst` the way redis-cli --cluster reshard does, with pauses in
/// the middle so calls meet ASK and TRYAGAIN.
fn migrate(cluster: &TestCluster, slot: u16, src: u16, dst: u16) {
    let (src_id, dst_id) = (cluster.node_id(src), cluster.node_id(dst));
    let s = slot.to_string();
    let ok = |port: u16, args: &[&str]| {
        let _: () = query(port, args).unwrap();
    };
    ok(dst, &["CLUSTER", "SETSLOT", &s, "IMPORTING", &src_id]);
    ok(src, &["CLUSTER", "SETSLOT", &s, "MIGRATING", &dst_id]);
    for _ in 0..5 {
        std::thread::sleep(Duration::from_millis(60));
        let keys: Vec<String> = query(src, &["CLUSTER", "GETKEYSINSLOT", &s, "100"]).unwrap();
        if keys.is_empty() {
            continue;
        }
        let port = dst.to_string();
        let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
        args.extend(keys.iter().map(String::as_str));
        let _: redis::Value = query(src, &args).unwrap();
    }
    loop {
        let keys: Vec<String> = query(src, &["CLUSTER", "GETKEYSINSLOT", &s, "100"]).unwrap();
        if keys.is_empty() {
            break;
        }
        let port = dst.to_string();
        let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
        args.extend(keys.iter().map(String::as_str));
        let _: redis::Value = query(src, &args).unwrap();
    }
    ok(dst, &["CLUSTER", "SETSLOT", &s, "NODE", &dst_id]);
    ok(src, &["CLUSTER", "SETSLOT", &s, "NODE", &dst_id]);
    for (p, _) in cluster.masters() {
        if p != src && p != dst {
            ok(p, &["CLUSTER", "SETSLOT", &s, "NODE", &dst_id]);
        }
    }
}

#[test]
fn a_killed_master_is_replaced_and_work_continues() {
    let mut cluster = TestCluster::start();
    let ns = "kill";
    let c = client(&cluster, ns);
    let slot = key_slot(lock_key(ns, "victim").as_bytes());
    let victim = cluster.owner_of(slot);
    let stop = Arc::new(AtomicBool::new(false));
    let after_promotion = Arc::new(AtomicBool::new(false));
    let outcomes = Arc::new(Mutex::new(Outcomes::default()));
    let threads: Vec<_> = (0..6)
        .map(|i| {
            let m = mutex(&c, "victim", 1_000);
            let (stop, after, out) = (stop.clone(), after_promotion.clone(), outcomes.clone());
            std::thread::spawn(move || {
                let intr = Interrupt::new();
                while !stop.load(Ordering::SeqCst) {
                    let deadline = Instant::now() + Duration::from_secs(2);
                    let run = m
                        .lock(&intr, &DistMutex::new_token(), Some(deadline))
                        .and_then(|h| {
                            // Some hold long enough to be holding when the master dies.
                            let hold = if i == 0 { 300 } else { 5 };
                            std::thread::sleep(Duration::from_millis(hold));
                            m.unlock(&intr, h)
                        });
                    let late = after.load(Ordering::SeqCst);
                    out.lock().unwrap().record(run, late);
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    cluster.kill(victim);
    let killed = Instant::now();
    wait_until(30, || {
        let masters = cluster.masters();
        masters.iter().all(|(p, _)| *p != victim) && masters.len() == 3
    });
    cluster.wait_ok();
    eprintln!("replica promoted {:?} after the kill", killed.elapsed());
    after_promotion.store(true, Ordering::SeqCst);
    // A lease held on the dead master runs out (1 s) before the next holder gets in.
    wait_until(30, || outcomes.lock().unwrap().ok_after >= 10);
    stop.store(true, Ordering::SeqCst);
    threads.into_iter().for_each(|t| t.join().unwrap());
    let out = outcomes.lock().unwrap();
    eprintln!("{out:?}");
    assert!(out.wrong.is_empty(), "wrong answers: {:?}", out.wrong);
    assert!(killed.elapsed() > Duration::from_millis(NODE_TIMEOUT_MS));
}

#[derive(Default, Debug)]
struct Outcomes {
    ok_before: usize,
    ok_after: usize,
    /// Redis unreachable, or the wait ran out while it was: the caller is told, nothing wrong.
    unreachable: usize,
    /// The lease was lost in the failover and release said so: a true answer.
    lost: usize,
    wrong: Vec<Error>,
}

impl Outcomes {
    fn record(&mut self, run: Result<(), Error>, after: bool) {
        match run {
            Ok(()) if after => self.ok_after += 1,
            Ok(()) => self.ok_before += 1,
            Err(Error::Connection { .. } | Error::Timeout(_)) => self.unreachable += 1,
            Err(Error::LockLost(_)) => self.lost += 1,
            Err(e) => self.wrong.push(e),
        }
    }
}

#[test]
fn a_timed_out_blpop_is_unblocked_on_its_own_node() {
    let cluster = TestCluster::shared();
    let ns = "unblock";
    let c = client(cluster, ns);
    for name in spread_names(cluster, ns) {
        let key = lock_key(ns, &name);
        let node = cluster.owner_of(key_slot(key.as_bytes()));
        // Client ids grow: connections made after this one have larger ids.
        let before: i64 = query(node, &["CLIENT", "ID"]).unwrap();
        assert!(c
            .blpop(&Interrupt::new(), &key, Duration::from_millis(50))
            .unwrap()
            .is_none());
        let list: String = query(node, &["CLIENT", "LIST"]).unwrap();
        let unblocked_here = list.lines().any(|l| {
            let id: i64 = l["id=".len()..l.find(' ').unwrap()].parse().unwrap();
            id > before && l.contains("cmd=client|unblock")
        });
        assert!(unblocked_here, "no CLIENT UNBLOCK on {node}:\n{list}");
    }
}

#[test]
fn cancel_ends_a_wait_on_a_cluster_node() {
    let cluster = TestCluster::shared();
    let c = client(cluster, "cancel");
    let intr = Interrupt::new();
    let m = mutex(&c, "held", 30_000);
    let held = m.lock(&intr, &DistMutex::new_token(), None).unwrap();
    let waiter_intr = Arc::new(Interrupt::new());
    let waiter = {
        let (m, intr) = (mutex(&c, "held", 30_000), waiter_intr.clone());
        std::thread::spawn(move || m.lock(&intr, &DistMutex::new_token(), None).map(drop))
    };
    std::thread::sleep(Duration::from_millis(200));
    let cancelled = Instant::now();
    waiter_intr.cancel();
    assert_eq!(waiter.join().unwrap().unwrap_err(), Error::Interrupted);
    // Far below the 30 s lease the waiter would otherwise block for.
    assert!(cancelled.elapsed() < Duration::from_secs(5));
    m.unlock(&intr, held).unwrap();
}
