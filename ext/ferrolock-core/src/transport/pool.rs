//! Idle connections to one server, reset in a forked child. A single-server client has one; a
//! cluster client one per node; a Sentinel client one for the current primary.

use crate::error::Result;
use crate::fork::ForkLocal;
use crate::transport::conn::{Conn, Timeouts};
use crate::transport::endpoint::Endpoint;
use crate::transport::spin::ReplySpin;
use std::sync::{Arc, Mutex};

/// Idle connections kept per server; more may be open while many threads are busy.
const MAX_IDLE: usize = 64;

/// How every connection of a client is opened (shared by all its pools).
pub(crate) struct Connector {
    pub timeouts: Timeouts,
    pub tls: Option<Arc<rustls::ClientConfig>>,
    pub spin: Arc<ReplySpin>,
}

pub struct NodePool {
    pub(crate) endpoint: Endpoint,
    /// `host:port`, what errors and routing tables name.
    pub(crate) addr: String,
    idle: ForkLocal<Mutex<Vec<Conn>>>,
}

impl NodePool {
    pub(crate) fn new(endpoint: Endpoint) -> NodePool {
        NodePool {
            addr: endpoint.display_addr(),
            endpoint,
            idle: ForkLocal::new(|| Mutex::new(Vec::new())),
        }
    }

    /// An idle connection that is still open, or a new one. Nothing has been sent when this
    /// fails, so a caller may retry elsewhere.
    pub(crate) fn checkout(&self, how: &Connector) -> Result<Conn> {
        let idle = self.idle.get();
        loop {
            let candidate = idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
            match candidate {
                Some(c) if !c.is_alive() => continue, // closed by the server: drop it
                Some(c) => return Ok(c),
                None => break,
            }
        }
        Conn::connect(
            &self.endpoint,
            how.timeouts,
            how.tls.as_ref(),
            how.spin.clone(),
        )
    }

    /// Puts `conn` back unless `result` says it is in an unknown state (I/O error, interrupted).
    pub(crate) fn checkin<R>(&self, conn: Conn, result: &Result<R>) {
        match result {
            Err(e) if e.is_io() => drop(conn),
            _ => {
                let mut idle = self.idle.get().lock().unwrap_or_else(|e| e.into_inner());
                if idle.len() < MAX_IDLE {
                    idle.push(conn);
                }
            }
        }
    }

    /// Drops every idle connection (the server changed role or went away).
    pub(crate) fn clear(&self) {
        self.idle
            .get()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    pub(crate) fn with_conn<R>(
        &self,
        how: &Connector,
        f: impl FnOnce(&mut Conn, &NodePool) -> Result<R>,
    ) -> Result<R> {
        let mut conn = self.checkout(how)?;
        let result = f(&mut conn, self);
        self.checkin(conn, &result);
        result
    }
}
