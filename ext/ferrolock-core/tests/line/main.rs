//! The wait path of DistMutex and ConcurrentLimiter (src/line/), one test binary: the hand-off,
//! the local line and the cohort run against both primitives (`both!`, both.rs); what only one
//! of them has (fencing tokens, several slots) is tested beside. Each test starts its own
//! throwaway redis-server (support/), so tests stay independent within the binary.

#[path = "../support/mod.rs"]
mod support;

mod both;
mod cohort;
mod dist_mutex_local_line;
mod handoff;
mod inbox;
mod limiter_handoff;
mod limiter_local_line;
mod local_line;
mod parked;
mod release_handoff;
