//! The grant inbox's subscription (see inbox.rs): a thread of its own per client and process,
//! subscribed to the inbox's channel and to the revoked tokens' one, that keeps what it hears in
//! the inbox for its waiters. Started by the first waiter of the process that queues (or the
//! first release that queues a local waiter), ended after `IDLE_AFTER` unused, when the client
//! is dropped, or in a forked child.

use crate::client::{Client, ClientInner};
use crate::error::{Error, Result};
use crate::inbox::Inbox;
use crate::interrupt::Interrupt;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// How often the listener looks up from a silent connection.
const LISTEN_TICK: Duration = Duration::from_millis(250);
/// A silent subscription is pinged after this, and dropped when the pong does not come within
/// the read timeout (a paused or unreachable server).
const KEEPALIVE: Duration = Duration::from_secs(5);
/// The subscription ends after this long without anyone waiting (the next waiter starts it again).
const IDLE_AFTER: Duration = Duration::from_secs(60);
/// Grants nobody took (the waiter gave up as it came) are forgotten after this.
const UNCLAIMED_FOR: Duration = Duration::from_secs(300);
const RETRY_MIN: Duration = Duration::from_millis(50);
const RETRY_MAX: Duration = Duration::from_secs(1);

impl Inbox {
    /// Starts the subscription if it is not running (a waiter just queued with a grant list:
    /// its process is contended, so its next waits will use the inbox). Never waits for it.
    /// When the OS refuses the thread, grants keep going to grant lists (the next start tries
    /// again).
    pub fn start(self: &Arc<Self>, client: &Client) {
        let mut st = self.state();
        st.last_wait = Some(Instant::now());
        if st.running || st.refused || st.stopped {
            return;
        }
        let me = self.clone();
        let weak = Arc::downgrade(&client.inner);
        let spawned = crate::quiet_thread::spawn_quiet("ferrolock-inbox", move || me.run(weak));
        st.running = spawned.is_ok();
    }

    /// `id_if_listening`, starting the subscription when it is not running: for a release that
    /// queues a local waiter (its process is contended, whether or not one of its own attempts
    /// ever failed).
    pub fn id_or_start(self: &Arc<Self>, client: &Client) -> Option<&str> {
        if self.id_if_listening().is_none() {
            self.start(client);
            return None;
        }
        Some(&self.id)
    }

    fn run(self: Arc<Self>, client: Weak<ClientInner>) {
        let mut retry = RETRY_MIN;
        loop {
            let conn = {
                let Some(inner) = client.upgrade() else {
                    break;
                };
                if self.state().stopped {
                    break;
                }
                let client = Client { inner };
                let channels = [
                    Inbox::channel(client.namespace(), &self.id),
                    Inbox::revoked_channel(client.namespace()),
                ];
                subscribe(&client, &channels)
            };
            match conn {
                Ok(Subscribed::Listening(conn)) => {
                    {
                        let mut st = self.state();
                        st.listening_since = Some(Instant::now());
                        st.listened = true;
                    }
                    self.changed.notify_all();
                    let listened_at = Instant::now();
                    let keep_on = self.listen(conn, &client);
                    self.state().listening_since = None;
                    if !keep_on {
                        break;
                    }
                    // A subscription that keeps breaking at once (each one makes every waiter
                    // attempt again) is retried with the same backoff as a failed one.
                    if listened_at.elapsed() < RETRY_MAX {
                        std::thread::sleep(retry);
                        retry = (retry * 2).min(RETRY_MAX);
                    } else {
                        retry = RETRY_MIN;
                    }
                }
                Ok(Subscribed::Refused) => {
                    self.state().refused = true;
                    break;
                }
                Err(_) => {
                    // Unreachable for now (waiters meanwhile find their grants by attempting
                    // again, at the latest after the holder's TTL): retried while in use.
                    let st = self.state();
                    let unused =
                        st.waiting == 0 && st.last_wait.is_none_or(|at| at.elapsed() >= IDLE_AFTER);
                    if st.stopped || unused {
                        break;
                    }
                    drop(
                        self.changed
                            .wait_timeout(st, retry)
                            .unwrap_or_else(|e| e.into_inner()),
                    );
                    retry = (retry * 2).min(RETRY_MAX);
                }
            }
        }
        let mut st = self.state();
        st.running = false;
        st.listened = false;
        st.listening_since = None;
        drop(st);
        self.changed.notify_all();
    }

    /// Reads grants until the connection breaks (true: subscribe again) or the inbox is no
    /// longer needed (false).
    fn listen(&self, mut conn: crate::transport::conn::Conn, client: &Weak<ClientInner>) -> bool {
        let read_timeout = match client.upgrade() {
            Some(inner) => Client { inner }.timeouts().read,
            None => return false,
        };
        let mut frames = Frames::default();
        let mut heard_at = Instant::now();
        let mut pinged_at: Option<Instant> = None;
        loop {
            match frames.next() {
                Ok(Some(frame)) => {
                    heard_at = Instant::now();
                    pinged_at = None;
                    self.take(frame);
                    continue;
                }
                Ok(None) => {}
                Err(_) => return true,
            }
            {
                let st = self.state();
                let idle =
                    st.waiting == 0 && st.last_wait.is_none_or(|at| at.elapsed() >= IDLE_AFTER);
                if st.stopped || idle || client.strong_count() == 0 {
                    return false;
                }
            }
            match conn.read_some(&mut frames.buf, LISTEN_TICK) {
                Ok(_) => {}
                Err(_) => return true,
            }
            let now = Instant::now();
            match pinged_at {
                Some(at) if now - at > read_timeout => return true,
                None if now - heard_at > KEEPALIVE => {
                    if conn.send(b"*1\r\n$4\r\nPING\r\n").is_err() {
                        return true;
                    }
                    pinged_at = Some(now);
                }
                _ => {}
            }
        }
    }

    /// A frame from the subscription: a grant (`message`, channel, `token|grant`) is kept for
    /// its waiter, a revoked token (`message`, the revoked channel, token) for cohorts;
    /// confirmations and pongs only show the connection is alive.
    fn take(&self, frame: Frame) {
        let Frame::Items(items) = frame else {
            return;
        };
        if items.len() != 3 || items[0] != b"message" {
            return;
        }
        let payload = String::from_utf8_lossy(&items[2]);
        if items[1].ends_with(b":inbox:revoked") {
            let now = Instant::now();
            let mut st = self.state();
            st.revoked
                .retain(|_, came| now.duration_since(*came) < UNCLAIMED_FOR);
            st.revoked.insert(payload.into_owned(), now);
            return;
        }
        let Some((token, grant)) = payload.rsplit_once('|') else {
            return;
        };
        let Ok(grant) = grant.parse::<i64>() else {
            return;
        };
        let now = Instant::now();
        let mut st = self.state();
        if st.purged_at.is_none_or(|at| now - at > UNCLAIMED_FOR) {
            st.grants
                .retain(|_, (_, came)| now.duration_since(*came) < UNCLAIMED_FOR);
            st.purged_at = Some(now);
        }
        st.grants.insert(token.to_string(), (grant, now));
        drop(st);
        self.changed.notify_all();
    }
}

enum Subscribed {
    Listening(crate::transport::conn::Conn),
    Refused,
}

/// A connection of its own (never pooled again) subscribed to `channels`.
fn subscribe(client: &Client, channels: &[String]) -> Result<Subscribed> {
    let mut conn = client.dedicated_conn(&Interrupt::new())?;
    let packed = redis::cmd("SUBSCRIBE").arg(channels).get_packed_command();
    conn.send(&packed)?;
    let deadline = Instant::now() + client.timeouts().read;
    let mut frames = Frames::default();
    let mut confirmed = 0;
    loop {
        match frames.next()? {
            Some(Frame::Items(items)) if items.first().is_some_and(|k| k == b"subscribe") => {
                // Every confirmation read here, so none is left in this buffer for `listen`.
                confirmed += 1;
                if confirmed == channels.len() {
                    return Ok(Subscribed::Listening(conn));
                }
            }
            Some(Frame::Error(e)) if e.starts_with("NOPERM") || e.contains("unknown command") => {
                return Ok(Subscribed::Refused);
            }
            Some(Frame::Error(e)) => return Err(Error::Redis(e)),
            Some(Frame::Items(_)) => {}
            None => {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(Error::connection(conn.addr(), "timed out subscribing"));
                }
                conn.read_some(&mut frames.buf, left)?;
            }
        }
    }
}

/// What a subscribed connection sends (RESP2): arrays of bulk strings and integers, or an
/// error. Parsed here rather than by the connection's parser, whose buffer a readiness check
/// could not see.
#[derive(Debug, PartialEq, Eq)]
enum Frame {
    Items(Vec<Vec<u8>>),
    Error(String),
}

#[derive(Default)]
struct Frames {
    buf: Vec<u8>,
}

impl Frames {
    /// The next complete frame, consumed from the buffer; `None` until one is complete.
    fn next(&mut self) -> Result<Option<Frame>> {
        let bad = || Error::Redis("grant inbox: unexpected bytes on the subscription".into());
        let Some((head, mut at)) = line(&self.buf, 0) else {
            return Ok(None);
        };
        let frame = match head.first() {
            Some(b'-') => Frame::Error(String::from_utf8_lossy(&head[1..]).into_owned()),
            Some(b'*') => {
                let count: usize = number(&head[1..]).ok_or_else(bad)?;
                let mut items = Vec::with_capacity(count);
                for _ in 0..count {
                    let Some((item, next)) = line(&self.buf, at) else {
                        return Ok(None);
                    };
                    match item.first() {
                        Some(b':') | Some(b'+') => {
                            items.push(item[1..].to_vec());
                            at = next;
                        }
                        Some(b'$') => {
                            let len: usize = number(&item[1..]).ok_or_else(bad)?;
                            let end = next + len;
                            if self.buf.len() < end + 2 {
                                return Ok(None);
                            }
                            items.push(self.buf[next..end].to_vec());
                            at = end + 2;
                        }
                        _ => return Err(bad()),
                    }
                }
                Frame::Items(items)
            }
            _ => return Err(bad()),
        };
        self.buf.drain(..at);
        Ok(Some(frame))
    }
}

/// The line starting at `from` (without its CRLF) and where the next one starts.
fn line(buf: &[u8], from: usize) -> Option<(&[u8], usize)> {
    let rest = buf.get(from..)?;
    let end = rest.windows(2).position(|w| w == b"\r\n")?;
    Some((&rest[..end], from + end + 2))
}

fn number(digits: &[u8]) -> Option<usize> {
    std::str::from_utf8(digits).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inbox::Waited;

    #[test]
    fn frames_are_parsed_once_complete_and_in_order() {
        let mut frames = Frames::default();
        let bytes = b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nt|123\r\n";
        frames.buf.extend_from_slice(&bytes[..20]);
        assert_eq!(frames.next().unwrap(), None);
        frames.buf.extend_from_slice(&bytes[20..]);
        assert_eq!(
            frames.next().unwrap(),
            Some(Frame::Items(vec![
                b"subscribe".to_vec(),
                b"ch".to_vec(),
                b"1".to_vec()
            ]))
        );
        assert_eq!(
            frames.next().unwrap(),
            Some(Frame::Items(vec![
                b"message".to_vec(),
                b"ch".to_vec(),
                b"t|123".to_vec()
            ]))
        );
        assert_eq!(frames.next().unwrap(), None);
        frames.buf.extend_from_slice(b"-NOPERM no channel\r\n");
        assert_eq!(
            frames.next().unwrap(),
            Some(Frame::Error("NOPERM no channel".into()))
        );
    }

    #[test]
    fn a_grant_waits_for_its_token_and_a_resubscription_reports_a_possible_miss() {
        let inbox = Inbox::default();
        let since = Instant::now();
        {
            let mut st = inbox.state();
            st.listening_since = Some(since);
            st.running = true;
        }
        let message = |payload: &str| {
            Frame::Items(vec![
                b"message".to_vec(),
                b"ch".to_vec(),
                payload.as_bytes().to_vec(),
            ])
        };
        inbox.take(message("other|7"));
        inbox.take(message("mine|42"));
        let intr = Interrupt::new();
        let short = Duration::from_millis(20);
        assert_eq!(
            inbox.wait(&intr, "mine", since, short).unwrap(),
            Waited::Granted(42)
        );
        assert_eq!(
            inbox.wait(&intr, "mine", since, short).unwrap(),
            Waited::TimedOut
        );
        // A grant kept from before an attempt is never taken after it.
        inbox.take(message("mine|43"));
        inbox.forget("mine");
        assert_eq!(
            inbox.wait(&intr, "mine", since, short).unwrap(),
            Waited::TimedOut
        );
        inbox.state().listening_since = Some(Instant::now());
        assert_eq!(
            inbox.wait(&intr, "mine", since, short).unwrap(),
            Waited::Missed
        );
        assert_eq!(
            inbox.wait(&intr, "mine", Instant::now(), short).unwrap(),
            Waited::TimedOut
        );
    }
}
