//! One Redis connection: a socket we own (so a blocked read can be cut with `shutdown(2)`),
//! RESP2 encoded by `redis::Cmd` and decoded by `redis::Parser`.

use crate::error::{Error, Result};
use crate::interrupt::Interrupt;
use crate::transport::endpoint::{Addr, Endpoint};
use crate::transport::poll::poll_fd;
use crate::transport::spin::ReplySpin;
use redis::{Parser, Value};
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    pub connect: Duration,
    pub read: Duration,
}

enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Stream {
    fn fd(&self) -> RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
            Stream::Tls(s) => s.sock.as_raw_fd(),
        }
    }

    fn set_read_timeout(&self, dur: Duration) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.set_read_timeout(Some(dur)),
            Stream::Unix(s) => s.set_read_timeout(Some(dur)),
            Stream::Tls(s) => s.sock.set_read_timeout(Some(dur)),
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(buf),
            Stream::Unix(s) => s.read(buf),
            Stream::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.write(buf),
            Stream::Unix(s) => s.write(buf),
            Stream::Tls(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Tcp(s) => s.flush(),
            Stream::Unix(s) => s.flush(),
            Stream::Tls(s) => s.flush(),
        }
    }
}

/// Reads one reply's bytes: EOF is an error (so the parser never spins), and a read cut short
/// by a signal is resumed, but only until the reply's deadline. Ruby signals threads blocked
/// in system calls often, and SO_RCVTIMEO restarts with every `recv`, so without the deadline
/// a silent server (SIGSTOP, a dead host) would never time out.
struct ReplyReader<'a> {
    stream: &'a mut Stream,
    deadline: Instant,
    shortened: bool,
}

impl Read for ReplyReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.stream.read(buf) {
                Ok(0) if !buf.is_empty() => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "connection closed",
                    ))
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                    let left = self.deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(io::Error::new(io::ErrorKind::TimedOut, "timed out"));
                    }
                    self.stream.set_read_timeout(left)?;
                    self.shortened = true;
                }
                other => return other,
            }
        }
    }
}

pub struct Conn {
    stream: Stream,
    parser: Parser,
    read_timeout: Duration,
    /// How long the reply being read may take (the socket's read timeout).
    reply_wait: Duration,
    addr: String,
    /// Shared by the client's connections (one polling thread per client).
    spin: Arc<ReplySpin>,
    /// This connection's CLIENT ID, asked before its first blocking command (see
    /// `request_blocking`).
    client_id: ClientId,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ClientId {
    Unknown,
    Known(i64),
    Refused,
}

impl Conn {
    pub fn connect(
        ep: &Endpoint,
        timeouts: Timeouts,
        tls: Option<&Arc<rustls::ClientConfig>>,
        spin: Arc<ReplySpin>,
    ) -> Result<Conn> {
        let addr = ep.display_addr();
        // A caller's deadline bounds the connect and handshake too (wait_timeout.rs).
        let timeouts = Timeouts {
            connect: crate::wait_timeout::cap(timeouts.connect),
            ..timeouts
        };
        let io_err = |e: io::Error| Error::connection(&addr, describe_io(&e));
        let stream = match &ep.addr {
            Addr::Tcp { host, port } => {
                Stream::Tcp(tcp_connect(host, *port, timeouts.connect).map_err(io_err)?)
            }
            Addr::Unix(path) => Stream::Unix(UnixStream::connect(path).map_err(io_err)?),
            Addr::Tls {
                host,
                port,
                insecure: _,
            } => {
                let tcp = tcp_connect(host, *port, timeouts.connect).map_err(io_err)?;
                let config =
                    tls.ok_or_else(|| Error::connection(&addr, "TLS is not configured"))?;
                let name = rustls::pki_types::ServerName::try_from(host.clone())
                    .map_err(|e| Error::argument(format!("url: bad TLS host name {host}: {e}")))?;
                let session = rustls::ClientConnection::new(config.clone(), name)
                    .map_err(|e| Error::connection(&addr, e))?;
                Stream::Tls(Box::new(rustls::StreamOwned::new(session, tcp)))
            }
        };
        let mut conn = Conn {
            stream,
            parser: Parser::new(),
            read_timeout: timeouts.read,
            reply_wait: timeouts.read,
            addr: addr.clone(),
            spin,
            client_id: ClientId::Unknown,
        };
        // The handshake (AUTH/SELECT) gets the connect timeout as its read timeout.
        conn.set_reply_wait(timeouts.connect).map_err(io_err)?;
        if let Some(password) = &ep.password {
            let mut auth = redis::cmd("AUTH");
            if let Some(user) = &ep.username {
                auth.arg(user);
            }
            auth.arg(&password.0);
            conn.roundtrip_plain(&auth.get_packed_command())
                .map_err(|e| match e {
                    // Never echo the AUTH arguments; Redis' own message is safe.
                    Error::Redis(msg) => {
                        Error::connection(&conn.addr, format!("authentication failed: {msg}"))
                    }
                    other => other,
                })?;
        }
        if ep.db != 0 {
            conn.roundtrip_plain(&redis::cmd("SELECT").arg(ep.db).get_packed_command())?;
        }
        conn.set_reply_wait(timeouts.read)
            .map_err(|e| Error::connection(&conn.addr, e))?;
        Ok(conn)
    }

    pub fn fd(&self) -> RawFd {
        self.stream.fd()
    }

    /// False when an idle connection was closed by the server (a restart, a timeout kill): Redis
    /// never writes to an idle connection, so anything readable on it means EOF or a reset.
    /// Costs one non-blocking `poll`, and spares the caller an error on a dead pooled socket.
    pub fn is_alive(&self) -> bool {
        matches!(
            poll_fd(self.fd(), libc::POLLIN | libc::POLLRDHUP, 0),
            Ok(false)
        )
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    fn roundtrip_plain(&mut self, packed: &[u8]) -> Result<Value> {
        self.send(packed)?;
        self.recv()
    }

    pub fn send(&mut self, packed: &[u8]) -> Result<()> {
        let addr = &self.addr;
        self.stream
            .write_all(packed)
            .map_err(|e| Error::connection(addr, describe_io(&e)))?;
        self.stream
            .flush()
            .map_err(|e| Error::connection(addr, describe_io(&e)))
    }

    /// Reads one reply. A server error reply becomes `Error::Redis`; the connection stays usable.
    pub fn recv(&mut self) -> Result<Value> {
        let value = self.recv_value()?;
        match value {
            Value::ServerError(e) => Err(self.server_error(&e)),
            v => Ok(v),
        }
    }

    /// An error reply as an error. A server that cannot serve right now (loading its data after a
    /// restart, a replica after a failover, a script running too long) is a connection problem,
    /// not an answer: the command did not run, and callers that handle `Connection` (retry,
    /// reschedule) must see it as such.
    pub fn server_error(&self, e: &redis::ServerError) -> Error {
        // UNBLOCKED: a blocking pop cut short because the server became a replica (failover).
        const UNAVAILABLE: [&str; 7] = [
            "UNBLOCKED",
            "LOADING",
            "BUSY",
            "MASTERDOWN",
            "READONLY",
            "TRYAGAIN",
            "CLUSTERDOWN",
        ];
        let text = server_error_text(e);
        if UNAVAILABLE.contains(&e.code()) {
            Error::connection(&self.addr, format!("not available ({text})"))
        } else if scripting_refused(&text) {
            Error::Redis(format!(
                "Redis at {} cannot run Lua scripts, and every ferrolock change is one: it \
                 answered \"{text}\". Valkey 9.1+ runs Lua as a scripting engine that must be \
                 loaded; with ACLs, allow EVAL, EVALSHA and SCRIPT (+@scripting) for this user; \
                 EVAL and EVALSHA must not be renamed",
                self.addr
            ))
        } else {
            Error::Redis(text)
        }
    }

    /// Reads one reply, server errors returned as values (for pipelines).
    pub fn recv_value(&mut self) -> Result<Value> {
        let addr = self.addr.clone();
        // A caller's deadline may cut the wait short (wait_timeout.rs).
        let wait = crate::wait_timeout::cap(self.reply_wait);
        let capped = wait < self.reply_wait;
        if capped {
            self.stream
                .set_read_timeout(wait)
                .map_err(|e| Error::connection(&addr, e))?;
        }
        let mut reader = ReplyReader {
            stream: &mut self.stream,
            deadline: Instant::now() + wait,
            shortened: capped,
        };
        let parsed = self.parser.parse_value(&mut reader);
        if reader.shortened {
            self.stream
                .set_read_timeout(self.reply_wait)
                .map_err(|e| Error::connection(&addr, e))?;
        }
        parsed.map_err(|e| {
            if capped && e.is_timeout() {
                Error::connection(&addr, "no reply before the caller's timeout passed")
            } else if e.is_io_error() || e.is_timeout() || e.is_connection_dropped() {
                Error::connection(&addr, describe_redis_io(&e))
            } else {
                Error::Redis(format!("protocol error from {addr}: {e}"))
            }
        })
    }

    /// Runs one command, interruptible through `intr`.
    pub fn request(&mut self, intr: &Interrupt, packed: &[u8]) -> Result<Value> {
        self.exchange(intr, packed, true)
    }

    /// `poll_first`: the reply is expected soon (not a blocking command), so poll for it
    /// briefly before sleeping in `recv` (see spin.rs).
    fn exchange(&mut self, intr: &Interrupt, packed: &[u8], poll_first: bool) -> Result<Value> {
        let _watch = intr.watch(self.fd())?;
        let spin = self.spin.clone();
        let _in_flight = spin.enter();
        self.send(packed)
            .and_then(|_| {
                if !poll_first {
                    return self.recv();
                }
                let sent = Instant::now();
                spin.wait_readable(self.fd(), intr);
                let reply = self.recv()?;
                spin.record(sent.elapsed());
                Ok(reply)
            })
            .map_err(|e| interrupted_or(intr, e))
    }

    /// Sends `count` packed commands at once and reads their replies (errors kept as values).
    pub fn pipeline(
        &mut self,
        intr: &Interrupt,
        packed: &[u8],
        count: usize,
    ) -> Result<Vec<Value>> {
        let _watch = intr.watch(self.fd())?;
        let spin = self.spin.clone();
        let _in_flight = spin.enter();
        let run = |c: &mut Conn| -> Result<Vec<Value>> {
            c.send(packed)?;
            spin.wait_readable(c.fd(), intr);
            (0..count).map(|_| c.recv_value()).collect()
        };
        run(self).map_err(|e| interrupted_or(intr, e))
    }

    /// A blocking command (BLPOP) whose server-side timeout is `block`: the socket waits that
    /// long plus the normal read timeout before calling Redis unreachable.
    ///
    /// Redis ends a timed-out blocked client only at its next cron tick (up to 100 ms late at
    /// the default `hz 10`). With `unblock` given, at `block` this calls `unblock(id)` with the
    /// connection's client id, which sends `CLIENT UNBLOCK id TIMEOUT` from another connection.
    /// Redis then replies at once, with nil or with what was popped meanwhile, so nothing popped
    /// is ever lost. Where the server refuses CLIENT commands (ACL, proxy) the wait ends at
    /// Redis' own pace. An error from `unblock` (Redis unreachable) ends the call; the caller
    /// drops this connection.
    pub fn request_blocking(
        &mut self,
        intr: &Interrupt,
        packed: &[u8],
        block: Duration,
        unblock: Option<&dyn Fn(i64) -> Result<()>>,
    ) -> Result<Value> {
        let addr = self.addr.clone();
        self.set_reply_wait(block + self.read_timeout)
            .map_err(|e| Error::connection(&addr, e))?;
        let id = match unblock {
            Some(_) => self.client_id(intr)?,
            None => None,
        };
        let result = match (unblock, id) {
            (Some(unblock), Some(id)) => self
                .exchange_unblocking(intr, packed, block, id, unblock)
                .map_err(|e| interrupted_or(intr, e)),
            _ => self.exchange(intr, packed, false),
        };
        if result.is_ok() {
            self.set_reply_wait(self.read_timeout)
                .map_err(|e| Error::connection(&addr, e))?;
        }
        result
    }

    /// This connection's CLIENT ID, asked once, in its own round trip: pipelined with a blocking
    /// command, the parser could read that command's reply into its buffer together with the
    /// id, and the socket would then never turn readable for it. None where refused.
    pub(crate) fn client_id(&mut self, intr: &Interrupt) -> Result<Option<i64>> {
        if self.client_id == ClientId::Unknown {
            let asked = redis::cmd("CLIENT").arg("ID").get_packed_command();
            self.client_id = match self.request(intr, &asked) {
                Ok(Value::Int(id)) => ClientId::Known(id),
                Ok(_) | Err(Error::Redis(_)) => ClientId::Refused,
                Err(e) => return Err(e),
            };
        }
        Ok(match self.client_id {
            ClientId::Known(id) => Some(id),
            _ => None,
        })
    }

    fn exchange_unblocking(
        &mut self,
        intr: &Interrupt,
        packed: &[u8],
        block: Duration,
        id: i64,
        unblock: &dyn Fn(i64) -> Result<()>,
    ) -> Result<Value> {
        let spin = self.spin.clone();
        let _in_flight = spin.enter();
        let deadline = Instant::now() + block;
        let replied = {
            let _watch = intr.watch(self.fd())?;
            self.send(packed)?;
            self.readable_before(deadline)?
        };
        // `unblock` watches its own connection through the same interrupt, so this one is
        // watched again for the (now immediate) reply.
        if !replied {
            unblock(id)?;
        }
        let _watch = intr.watch(self.fd())?;
        self.recv()
    }

    /// Waits without reading until the socket is readable (true) or `deadline` passes (false).
    /// A cancel shuts the socket down, which makes it readable.
    fn readable_before(&self, deadline: Instant) -> Result<bool> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(false);
            }
            let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
            match poll_fd(self.fd(), libc::POLLIN, ms) {
                Ok(true) => return Ok(true),
                Ok(false) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::connection(&self.addr, describe_io(&e))),
            }
        }
    }

    /// Appends what arrives within `wait` to `buf` (one read; 0 when nothing came): for the
    /// grant inbox's subscribed connection, which parses its own frames (line/subscription.rs). A read
    /// timeout keeps the connection usable: TLS keeps a partial record for the next read.
    pub(crate) fn read_some(&mut self, buf: &mut Vec<u8>, wait: Duration) -> Result<usize> {
        let addr = self.addr.clone();
        self.set_reply_wait(wait.max(Duration::from_millis(1)))
            .map_err(|e| Error::connection(&addr, e))?;
        let mut chunk = [0u8; 4096];
        match self.stream.read(&mut chunk) {
            Ok(0) => Err(Error::connection(&addr, "connection closed")),
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                Ok(n)
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                Ok(0)
            }
            Err(e) => Err(Error::connection(&addr, describe_io(&e))),
        }
    }

    fn set_reply_wait(&mut self, wait: Duration) -> io::Result<()> {
        self.reply_wait = wait;
        self.stream.set_read_timeout(wait)
    }
}

fn interrupted_or(intr: &Interrupt, e: Error) -> Error {
    if e.is_io() && intr.is_cancelled() {
        Error::Interrupted
    } else {
        e
    }
}

fn tcp_connect(host: &str, port: u16, timeout: Duration) -> io::Result<TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, "host name did not resolve");
    for sa in (host, port).to_socket_addrs()? {
        match TcpStream::connect_timeout(&sa, timeout) {
            Ok(s) => {
                s.set_nodelay(true)?;
                return Ok(s);
            }
            Err(e) => last = e,
        }
    }
    Err(last)
}

fn describe_io(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => "timed out".to_string(),
        _ => e.to_string(),
    }
}

fn describe_redis_io(e: &redis::RedisError) -> String {
    if e.is_timeout() {
        "timed out".to_string()
    } else {
        e.to_string()
    }
}

/// Whether an error reply says the server will not run scripts at all (no Lua engine, a renamed
/// or ACL-forbidden EVAL/EVALSHA), as opposed to a script's own error: that one reads as a raw
/// "unknown command" otherwise, which names nothing a user can act on.
fn scripting_refused(text: &str) -> bool {
    let text = text.to_ascii_lowercase();
    let names_script = [
        "'eval'",
        "'evalsha'",
        "'script'",
        "'eval_ro'",
        "'evalsha_ro'",
    ]
    .iter()
    .any(|name| text.contains(name));
    (names_script && (text.starts_with("err unknown command") || text.starts_with("noperm")))
        || text.contains("scripting engine")
        || text.contains("lua engine")
}

fn server_error_text(e: &redis::ServerError) -> String {
    match e.details() {
        Some(d) => format!("{} {}", e.code(), d),
        None => e.code().to_string(),
    }
}
