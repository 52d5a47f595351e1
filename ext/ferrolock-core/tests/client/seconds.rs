//! Property test of the seconds conversions: over extreme, boundary and random f64 values
//! (random bit patterns cover NaN payloads, subnormals and huge exponents), nothing panics and
//! exactly the documented range is accepted. Deterministic (a fixed xorshift seed), no Redis.

use ferrolock_core::seconds::{self, MAX, MAX_SECONDS};
use std::time::{Duration, Instant};

const MAX_F: f64 = MAX_SECONDS as f64;

/// The documented ranges, stated independently of the implementation.
fn span_accepts(x: f64) -> bool {
    x.is_finite() && (0.001..=MAX_F).contains(&x)
}

fn wait_accepts(x: f64) -> bool {
    x.is_finite() && (0.0..=MAX_F).contains(&x)
}

fn check(x: f64) {
    let now = Instant::now();
    match seconds::span("ttl", x) {
        Ok(d) => {
            assert!(span_accepts(x), "span accepted {x:e}");
            assert!(
                (seconds::MIN_SPAN..=MAX).contains(&d),
                "span {x:e} gave {d:?}"
            );
            // What the primitives then do with it must not overflow either.
            assert!(now.checked_add(d).is_some());
            assert!(seconds::millis(d) <= MAX_SECONDS * 1000);
            assert_eq!(seconds::check_span("ttl", d), Ok(d));
        }
        Err(e) => {
            assert!(!span_accepts(x), "span rejected {x:e}: {e}");
            let msg = e.to_string();
            assert!(msg.starts_with("ttl: "), "{msg}");
            assert!(msg.contains("315360000 seconds (10 years)"), "{msg}");
        }
    }
    match seconds::wait("timeout", x) {
        Ok(d) => {
            assert!(wait_accepts(x), "wait accepted {x:e}");
            assert!(d <= MAX);
        }
        Err(e) => {
            assert!(!wait_accepts(x), "wait rejected {x:e}: {e}");
            assert!(e.to_string().starts_with("timeout: "));
        }
    }
    match seconds::deadline("timeout", x, now) {
        Ok(at) => {
            assert!(wait_accepts(x));
            assert!(at >= now && at <= now + MAX);
        }
        Err(_) => assert!(!wait_accepts(x)),
    }
}

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

#[test]
fn extreme_and_boundary_values() {
    let specials = [
        f64::NAN,
        -f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::MAX,
        f64::MIN,
        f64::MIN_POSITIVE,
        -f64::MIN_POSITIVE,
        f64::from_bits(1), // smallest subnormal
        f64::EPSILON,
        0.0,
        -0.0,
        1e-300,
        0.0009999999,
        0.001,
        0.0010000001,
        1.0,
        1.8e19, // where Duration::from_secs_f64 used to panic
        1e30,
        u64::MAX as f64,
        MAX_F,
        MAX_F - 1e-6,
        f64::from_bits(MAX_F.to_bits() + 1), // the next f64 above the bound
        f64::from_bits(MAX_F.to_bits() - 1),
        -1.0,
    ];
    for x in specials {
        check(x);
    }
    assert!(seconds::span("ttl", MAX_F).is_ok());
    assert!(seconds::span("ttl", f64::from_bits(MAX_F.to_bits() + 1)).is_err());
    assert!(seconds::span("ttl", 0.001).is_ok());
    assert!(seconds::span("ttl", 0.0009999999).is_err());
    assert!(seconds::wait("timeout", f64::from_bits(1)).is_ok());
}

#[test]
fn random_bit_patterns_and_magnitudes() {
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    for _ in 0..200_000 {
        // Any bit pattern: every exponent, NaN payloads, subnormals, both signs.
        check(f64::from_bits(rng.next()));
        // Values spread over the magnitudes that matter, around both bounds.
        let exp = (rng.next() % 40) as i32 - 20;
        let mantissa = (rng.next() % 1_000_000) as f64 / 100_000.0;
        check(mantissa * 10f64.powi(exp));
        check(MAX_F + (rng.next() % 2001) as f64 - 1000.0);
    }
}

#[test]
fn check_span_and_millis_over_durations() {
    let mut rng = XorShift(42);
    for d in [
        Duration::ZERO,
        Duration::from_nanos(999_999),
        Duration::MAX,
        MAX,
        MAX + Duration::from_nanos(1),
    ] {
        let ok = seconds::check_span("lease", d).is_ok();
        assert_eq!(ok, d >= seconds::MIN_SPAN && d <= MAX, "{d:?}");
        let _ = seconds::millis(d);
    }
    for _ in 0..100_000 {
        let d = Duration::new(rng.next(), (rng.next() % 1_000_000_000) as u32);
        assert_eq!(
            seconds::check_span("lease", d).is_ok(),
            d >= seconds::MIN_SPAN && d <= MAX
        );
        assert_eq!(
            u128::from(seconds::millis(d)),
            d.as_millis().min(u128::from(u64::MAX))
        );
    }
}
