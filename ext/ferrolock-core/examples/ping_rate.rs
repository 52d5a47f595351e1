//! Round-trip costs through the core client, without Ruby:
//! `cargo run --release --example ping_rate -- redis://127.0.0.1:6379/0`.
use ferrolock_core::{Client, ClientOptions, Interrupt};
use ferrolock_core::{DistMutex, DistMutexOptions};
use std::time::Instant;

fn rate(label: &str, n: u32, mut op: impl FnMut()) {
    let started = Instant::now();
    for _ in 0..n {
        op();
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{label}: {:.0}/s ({:.1} us each)",
        n as f64 / secs,
        secs * 1e6 / n as f64
    );
}

fn main() {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "redis://127.0.0.1:6379/0".into());
    let client = Client::new(ClientOptions::new(&url)).expect("client");
    let intr = Interrupt::new();
    let m = DistMutex::new(&client, "ping_rate", DistMutexOptions::default()).expect("mutex");
    for _ in 0..3 {
        rate("PING x2", 10_000, || {
            client.command(&intr, &[b"PING".to_vec()]).expect("PING");
            client.command(&intr, &[b"PING".to_vec()]).expect("PING");
        });
        rate("lock+unlock", 10_000, || {
            let held = m.lock(&intr, &DistMutex::new_token(), None).expect("lock");
            m.unlock(&intr, held).expect("unlock");
        });
        rate("SET NX PX + DEL", 10_000, || {
            client
                .command(
                    &intr,
                    &[
                        b"SET".to_vec(),
                        b"raw".to_vec(),
                        b"t".to_vec(),
                        b"NX".to_vec(),
                        b"PX".to_vec(),
                        b"30000".to_vec(),
                    ],
                )
                .expect("SET");
            client
                .command(&intr, &[b"DEL".to_vec(), b"raw".to_vec()])
                .expect("DEL");
        });
    }
}
