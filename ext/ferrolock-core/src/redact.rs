//! The one place that hides secrets in text shown to people: URLs (well-formed or mistyped),
//! `?pass=` style query values, and `password: "…"` / `:password=>"…"` in an inspected Hash.
//! Ruby's `Ferrolock::Redact` calls this too (`Native.redact`), so every inspect, log line,
//! error message, page and CLI line is redacted by the same rules.
//!
//! It only looks at delimiters, never parses, so a URL that does not parse is redacted as well.
//! When in doubt it hides too much (a unix path holding '@' loses its start), never too little.

/// Query or Hash keys whose value is a secret: any key containing one of these words,
/// case-insensitively, after percent-decoding (`p%61ss=` is `pass=` to a URL parser).
const SECRET_WORDS: [&str; 4] = ["pass", "secret", "token", "auth"];
const MASK: &str = "***";

/// `text` with every password it carries replaced by `***`.
pub fn redact(text: &str) -> String {
    redact_hash_values(&redact_query_values(&redact_userinfo(text)))
}

/// Schemes a Redis URL may start with, also mistyped without "//" (`redis:pw@h`).
const SCHEMES: [&str; 6] = ["redis", "rediss", "unix", "redis+unix", "valkey", "valkeys"];

/// `scheme://user:secret@host` → `scheme://user:***@host`; `scheme://secret@host` →
/// `scheme://***@host`, for each URL in the text. Also for a mistyped one (`redis//:pw@h`,
/// `redis:pw@h`): everything from where the authority starts to the last '@' before the next
/// URL is user information.
fn redact_userinfo(text: &str) -> String {
    let anchors = anchors(text);
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    for (i, &(url_start, start)) in anchors.iter().enumerate() {
        let end = anchors.get(i + 1).map_or(text.len(), |&(next, _)| next);
        let segment = &text[start..end];
        out.push_str(&text[pos..start]);
        pos = end;
        // A socket path (unix:///tmp/a@b.sock) has no user information.
        let unix_path = segment.starts_with('/')
            && text[url_start..start].to_ascii_lowercase().contains("unix");
        let at = if unix_path { None } else { segment.rfind('@') };
        let Some(at) = at else {
            out.push_str(segment);
            continue;
        };
        let userinfo = &segment[..at];
        match userinfo.find(':') {
            Some(colon) => {
                out.push_str(&userinfo[..colon]);
                out.push(':');
                out.push_str(MASK);
            }
            None => out.push_str(MASK),
        }
        out.push_str(&segment[at..]);
    }
    out.push_str(&text[pos..]);
    out
}

/// Each URL's (start, where its user information would begin): after each "//", and after a
/// known scheme followed by ':' but not "//".
fn anchors(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(b"//") {
            found.push((scheme_start(bytes, i), i + 2));
            i += 2;
            continue;
        }
        let at_word_start = i == 0 || !is_scheme_byte(bytes[i - 1]);
        let scheme = SCHEMES.iter().rev().find(|s| {
            bytes.len() > i + s.len()
                && bytes[i..i + s.len()].eq_ignore_ascii_case(s.as_bytes())
                && bytes[i + s.len()] == b':'
                && !bytes[i + s.len() + 1..].starts_with(b"//")
        });
        match scheme {
            Some(s) if at_word_start => {
                found.push((i, i + s.len() + 1));
                i += s.len() + 1;
            }
            _ => i += 1,
        }
    }
    found
}

/// Where the scheme before the "//" at `slashes` starts (its ':' included), or `slashes`.
fn scheme_start(bytes: &[u8], slashes: usize) -> usize {
    let mut start = slashes;
    if start > 0 && bytes[start - 1] == b':' {
        start -= 1;
    }
    while start > 0 && is_scheme_byte(bytes[start - 1]) {
        start -= 1;
    }
    start
}

fn is_scheme_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'+' | b'-' | b'.')
}

/// `?pass=x`, `&password=x`, `;sentinel_password=x` → `…=***`. A value runs to the next
/// separator that starts another `key=` (a raw '&' inside a password stays hidden), else to
/// the end of the URL: whitespace or a quote (a URL holds neither unescaped).
fn redact_query_values(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    while let Some((key_start, eq)) = next_pair(text, pos) {
        let key = &text[key_start..eq];
        if !secret_key(key) {
            out.push_str(&text[pos..=eq]);
            pos = eq + 1;
            continue;
        }
        let url_end = text[eq + 1..]
            .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\''))
            .map_or(text.len(), |i| eq + 1 + i);
        let value_end = next_pair(text, eq + 1)
            .map(|(next_key, _)| next_key - 1)
            .filter(|&end| end < url_end)
            .unwrap_or(url_end);
        out.push_str(&text[pos..=eq]);
        out.push_str(MASK);
        pos = value_end;
    }
    out.push_str(&text[pos..]);
    out
}

/// The next `key=` after a '?', '&' or ';' at or after `from`: (key start, index of '=').
fn next_pair(text: &str, from: usize) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut i = from;
    while i < bytes.len() {
        if matches!(bytes[i], b'?' | b'&' | b';') {
            let key_start = i + 1;
            let key_len = bytes[key_start..]
                .iter()
                .take_while(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'%'))
                .count();
            if key_len > 0 && bytes.get(key_start + key_len) == Some(&b'=') {
                return Some((key_start, key_start + key_len));
            }
        }
        i += 1;
    }
    None
}

/// `password: "x"`, `:password=>"x"`, `"password"=>"x"`, `password="x"` (an inspected Hash or
/// Struct) → the quoted value becomes `"***"`.
fn redact_hash_values(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut pos = 0;
    let bytes = text.as_bytes();
    while let Some(rel) = text[pos..].find('"') {
        let quote = pos + rel;
        let Some(close) = closing_quote(bytes, quote) else {
            break;
        };
        if secret_key(key_before(&text[..quote])) {
            out.push_str(&text[pos..=quote]);
            out.push_str(MASK);
            out.push('"');
        } else {
            out.push_str(&text[pos..=close]);
        }
        pos = close + 1;
    }
    out.push_str(&text[pos..]);
    out
}

/// The index of the '"' closing the one at `open` (skipping backslash escapes).
fn closing_quote(bytes: &[u8], open: usize) -> Option<usize> {
    let mut i = open + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

/// The key naming the value that starts at the end of `before`: the word before `: `, `=>`
/// or `=` (quotes and a leading ':' dropped), or "" when there is none.
fn key_before(before: &str) -> &str {
    let trimmed = before.trim_end();
    let Some(head) = trimmed
        .strip_suffix("=>")
        .or_else(|| trimmed.strip_suffix(':'))
        .or_else(|| trimmed.strip_suffix('='))
    else {
        return "";
    };
    let head = head.trim_end().trim_end_matches('"');
    let start = head
        .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .map_or(0, |i| i + 1);
    &head[start..]
}

fn secret_key(key: &str) -> bool {
    let key = percent_decode(key).to_ascii_lowercase();
    !key.is_empty() && SECRET_WORDS.iter().any(|word| key.contains(word))
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn hides_the_password_of_every_url_form() {
        let cases = [
            ("redis://u:s3cret@h:1/0", "redis://u:***@h:1/0"),
            ("redis://:s3cret@h:1", "redis://:***@h:1"),
            ("redis://s3cret@h", "redis://***@h"),
            ("rediss://:s3cret@h:6380", "rediss://:***@h:6380"),
            ("redis://:p/a?s@h", "redis://:***@h"),
            ("redis://:p@ss@h", "redis://:***@h"),
            ("redis//:s3cret@h", "redis//:***@h"),
            ("redis:s3cret@h", "redis:***@h"),
            ("redis:/:s3cret@h", "redis:/:***@h"),
            ("redis:///:s3cret@h", "redis:///:***@h"),
            (
                "cluster redis://:a1@h1:1, redis://:b2@h2:2",
                "cluster redis://:***@h1:1, redis://:***@h2:2",
            ),
            (
                r#"["redis://:a1@h1", "rediss://u:b2@h2"]"#,
                r#"["redis://:***@h1", "rediss://u:***@h2"]"#,
            ),
            ("report:42@example", "report:42@example"),
            (
                "unix:///tmp/r.sock?pass=s3cret",
                "unix:///tmp/r.sock?pass=***",
            ),
            (
                "unix:///tmp/r.sock?db=2&user=u&pass=s3cret",
                "unix:///tmp/r.sock?db=2&user=u&pass=***",
            ),
            (
                "unix:///tmp/r.sock?p%61ss=s3cret&db=2",
                "unix:///tmp/r.sock?p%61ss=***&db=2",
            ),
            (
                "unix:///tmp/r.sock?password=s3&cret&db=2",
                "unix:///tmp/r.sock?password=***&db=2",
            ),
            (
                "redis://h?sentinel_password=s3cret",
                "redis://h?sentinel_password=***",
            ),
            (
                "at unix:///s?pass=s3cret: refused",
                "at unix:///s?pass=*** refused",
            ),
            ("redis://h:1/0", "redis://h:1/0"),
            ("unix:///tmp/a@b.sock", "unix:///tmp/a@b.sock"),
        ];
        for (given, shown) in cases {
            assert_eq!(redact(given), shown, "{given}");
        }
    }

    #[test]
    fn hides_password_values_of_an_inspected_hash() {
        assert_eq!(
            redact(
                r#"[{:host=>"h", :password=>"s3\"cret"}, {password: "x"}, {"sentinel_password"=>"y"}]"#
            ),
            r#"[{:host=>"h", :password=>"***"}, {password: "***"}, {"sentinel_password"=>"***"}]"#
        );
        assert_eq!(
            redact(r#"@redis_password="s3cret", @namespace="ns""#),
            r#"@redis_password="***", @namespace="ns""#
        );
        assert_eq!(
            redact(r#"name: "report", other"#),
            r#"name: "report", other"#
        );
    }

    #[test]
    fn leaves_plain_text_alone() {
        for text in [
            "report:42",
            "cannot reach Redis at 127.0.0.1:6379: refused",
            "a \"quoted\" word",
            "",
        ] {
            assert_eq!(redact(text), text);
        }
    }
}
