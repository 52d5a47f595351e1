//! Where a client connects and how it authenticates, parsed once from a URL.

use crate::error::{Error, Result};
use crate::redact::redact;
use redis::{ConnectionAddr, IntoConnectionInfo};
use std::path::PathBuf;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Addr {
    Tcp {
        host: String,
        port: u16,
    },
    Tls {
        host: String,
        port: u16,
        insecure: bool,
    },
    Unix(PathBuf),
}

/// A parsed Redis URL. `Debug` is derived on purpose only for fields without secrets; the
/// password is kept in a wrapper whose `Debug` prints `***`.
#[derive(Clone, Debug)]
pub struct Endpoint {
    pub addr: Addr,
    pub db: i64,
    pub username: Option<String>,
    pub password: Option<Secret>,
    redacted: String,
}

#[derive(Clone)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

impl Endpoint {
    pub fn parse(url: &str) -> Result<Endpoint> {
        let scheme_ok = ["redis://", "rediss://", "unix://", "redis+unix://"]
            .iter()
            .any(|s| url.starts_with(s));
        if !scheme_ok {
            return Err(Error::argument(format!(
                "url: expected redis://, rediss:// or unix://, got {}",
                shown_url(url)
            )));
        }
        // TLS is ours (rustls), not the redis crate's: parse rediss:// as redis:// and remember.
        let tls = url.starts_with("rediss://");
        let parse_as = if tls {
            url.replacen("rediss://", "redis://", 1)
        } else {
            url.to_string()
        };
        let info = parse_as.as_str().into_connection_info().map_err(|e| {
            Error::argument(format!(
                "url: cannot parse {} ({})",
                shown_url(url),
                e.detail().unwrap_or("invalid")
            ))
        })?;
        let addr = match info.addr() {
            ConnectionAddr::Tcp(host, port) if tls => Addr::Tls {
                host: host.clone(),
                port: *port,
                insecure: false,
            },
            ConnectionAddr::Tcp(host, port) => Addr::Tcp {
                host: host.clone(),
                port: *port,
            },
            ConnectionAddr::Unix(path) => Addr::Unix(path.clone()),
            _ => return Err(Error::argument("url: unsupported address kind")),
        };
        if let Addr::Tcp { host, .. } | Addr::Tls { host, .. } = &addr {
            if host.is_empty() {
                return Err(Error::argument(format!(
                    "url: no host in {}",
                    shown_url(url)
                )));
            }
        }
        let settings = info.redis_settings();
        Ok(Endpoint {
            addr,
            db: settings.db(),
            username: settings.username().map(str::to_string),
            password: settings.password().map(|p| Secret(p.to_string())),
            redacted: redact(url),
        })
    }

    /// `host:port` or the socket path: what error messages name.
    pub fn display_addr(&self) -> String {
        match &self.addr {
            Addr::Tcp { host, port } | Addr::Tls { host, port, .. } => format!("{host}:{port}"),
            Addr::Unix(path) => path.display().to_string(),
        }
    }

    /// The same credentials, database and TLS choice at another address: a cluster node named
    /// by CLUSTER SLOTS or MOVED, a primary named by Sentinel.
    pub fn at(&self, host: &str, port: u16) -> Endpoint {
        let (addr, scheme) = match &self.addr {
            Addr::Tls { insecure, .. } => (
                Addr::Tls {
                    host: host.to_string(),
                    port,
                    insecure: *insecure,
                },
                "rediss",
            ),
            _ => (
                Addr::Tcp {
                    host: host.to_string(),
                    port,
                },
                "redis",
            ),
        };
        Endpoint {
            addr,
            db: self.db,
            username: self.username.clone(),
            password: self.password.clone(),
            redacted: format!("{scheme}://{host}:{port}"),
        }
    }

    /// The URL as given, with any password replaced by `***`.
    pub fn redacted_url(&self) -> &str {
        &self.redacted
    }
}

/// A URL for an error message: redacted, and cut after 200 characters so a huge argument does
/// not become a huge message.
fn shown_url(url: &str) -> String {
    const MAX: usize = 200;
    let redacted = redact(url);
    match redacted.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}… ({} bytes)", &redacted[..cut], url.len()),
        None => redacted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tcp_tls_unix() {
        let e = Endpoint::parse("redis://user:pw@127.0.0.1:7000/3").unwrap();
        assert_eq!(
            e.addr,
            Addr::Tcp {
                host: "127.0.0.1".into(),
                port: 7000
            }
        );
        assert_eq!(e.db, 3);
        assert_eq!(e.username.as_deref(), Some("user"));
        assert_eq!(e.password.as_ref().map(|s| s.0.as_str()), Some("pw"));
        assert!(!format!("{e:?}").contains("pw@"));
        let t = Endpoint::parse("rediss://h:6380").unwrap();
        assert!(matches!(t.addr, Addr::Tls { port: 6380, .. }));
        let u = Endpoint::parse("unix:///tmp/x.sock").unwrap();
        assert_eq!(u.addr, Addr::Unix("/tmp/x.sock".into()));
    }

    #[test]
    fn rejects_bad_urls() {
        for bad in ["http://x", "redis://h:notaport", "", "localhost:6379"] {
            let err = Endpoint::parse(bad).unwrap_err();
            assert!(
                matches!(err, Error::Argument(ref m) if m.starts_with("url:")),
                "{bad}: {err:?}"
            );
        }
        for url in [
            "http://u:topsecret@x",
            "redis//:topsecret@x",
            "unix://?pass=topsecret",
            "redis://:topsecret@h:notaport",
        ] {
            let err = Endpoint::parse(url).unwrap_err();
            assert!(!err.to_string().contains("topsecret"), "{err}");
        }
    }

    #[test]
    fn bad_url_errors_stay_short() {
        let huge = format!("http://u:topsecret@{}", "x".repeat(10 << 20));
        let msg = Endpoint::parse(&huge).unwrap_err().to_string();
        assert!(msg.len() < 400, "{} bytes", msg.len());
        assert!(!msg.contains("topsecret"));
    }
}
