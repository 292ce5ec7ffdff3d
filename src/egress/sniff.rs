//! What a proxied connection says it is for, from the first bytes the tool sent: the TLS
//! ClientHello's server name (port 443) or the HTTP/1 request's host (port 80). Pure: the proxy
//! reads, calls [`sniff`] on everything read so far, and reads more on [`Sniff::NeedMore`].
//!
//! Decisions:
//! - **Bounded**: at most [`MAX_HEAD`] (16 KiB) is looked at; a ClientHello or request head
//!   that is not complete within it is refused (`TooLarge`), as soon as a length field says so.
//! - **TLS: a small parser of our own, not `tls-parser`.** The check needs the record layer
//!   (a ClientHello may be split over several records and over several reads), which
//!   `tls-parser` leaves to the caller, and then only the extension list's framing. Where
//!   `tls-parser` parses the list it uses `many0(complete(..))`, so an extension it cannot parse
//!   silently ends the list (an SNI after it reads as "no SNI") and trailing bytes in the
//!   server-name list are ignored; it does not report duplicate extensions, which a server
//!   rejects and this check must too; and it parses ~30 extension bodies we do not need (each
//!   a chance to refuse a valid hello) with nom 7, phf and a build script. The parser here is
//!   ~150 lines of slice reads that return `None` instead of indexing past the end, tested
//!   exhaustively (every truncation of a real hello, every length field off by one, random
//!   bytes) and panic-free.
//! - **TLS rules**: every record up to the end of the ClientHello must be a handshake record
//!   (type 22, version 3.x, 1..=16384 bytes); the first handshake message must be a
//!   ClientHello; its lengths must add up exactly (no trailing bytes after the extensions);
//!   no extension type twice (RFC 8446 4.2); the server_name extension must hold exactly one
//!   host_name entry of 1..=255 bytes whose list length fills the extension exactly. A
//!   ClientHello without server_name yields [`Sniff::NoName`]. SSLv2-format hellos, ECH's
//!   inner name (encrypted, so only the outer public name is seen) and anything else are
//!   judged on what is visible: the visible name must be the one the connection was made for.
//! - **HTTP**: the head is parsed by `httparse` (no obs-fold, no space before a header's colon,
//!   no bare CR; a bare LF ends a line, as RFC 9112 2.2 lets a recipient accept and servers do;
//!   at most [`MAX_HEADERS`] headers); CONNECT is refused; two Host headers are refused;
//!   the Host value is parsed as a URI authority (`http` crate) and must have no userinfo; its
//!   port is dropped. An absolute-form target (`GET http://host/ HTTP/1.1`) must be `http` and
//!   name the same host as the Host header (the server would obey the target, RFC 9112 3.2.2),
//!   and stands in for a missing Host; authority-form targets are refused. A request with
//!   neither yields [`Sniff::NoName`]. A head whose body length is ambiguous is refused: both
//!   `Content-Length` and `Transfer-Encoding`, two `Content-Length`s, or a
//!   `Transfer-Encoding` other than a single `chunked` (the request smuggling shapes).
//! - Names come back canonical (lowercase ASCII, no trailing dot), IP literals in their
//!   canonical text (`0x7f000001` → `127.0.0.1`): the caller compares strings. A value that is
//!   neither (non-ASCII, `%`, spaces, NUL, invalid IP spelling) is refused.
//! - On 443 only the ClientHello is seen: what follows is encrypted, and reaches only the
//!   address the check allowed. On 80 this module judges the first head, before anything is
//!   connected; the proxy then serves the connection as HTTP (`egress::http`) and judges every
//!   later request with [`request_host`], the same rules on hyper's parse.

use std::collections::HashSet;

use http::uri::{Authority, Uri};

use crate::egress::decide::RefusalCode;
use crate::egress::policy::{looks_like_ip, normalize_name, parse_ip_literal};

/// The response header that marks a runner's refusal on port 80; its value is the code.
pub const REFUSAL_HEADER: &str = "X-Skill-Runner-Refused";
/// The start of every refusal's message.
pub const REFUSAL_MESSAGE: &str = "openvibe-skill-runner refused this connection:";

/// The most bytes looked at.
pub const MAX_HEAD: usize = 16 * 1024;
/// The most headers an HTTP request head may have.
pub const MAX_HEADERS: usize = 100;
/// Largest TLS plaintext record (RFC 8446 5.1).
const MAX_RECORD: usize = 1 << 14;

/// What the first bytes say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sniff {
    /// Not enough bytes yet: read more (the proxy bounds the wait).
    NeedMore,
    /// The name (or canonical IP literal) the client asked for.
    Name(String),
    /// A well-formed ClientHello without server_name, or a request without Host.
    NoName,
    /// Not acceptable: refuse the connection.
    Refused(SniffError),
}

/// Why the first bytes were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SniffError {
    #[error("the port {0} is not one the proxy serves")]
    UnsupportedPort(u16),
    #[error("the first {MAX_HEAD} bytes hold no complete request head or ClientHello")]
    TooLarge,
    #[error("not a TLS handshake")]
    NotTls,
    #[error("the first TLS handshake message is not a ClientHello")]
    NotClientHello,
    #[error("malformed TLS ClientHello: {0}")]
    MalformedTls(&'static str),
    #[error("TLS extension {0} appears twice")]
    DuplicateExtension(u16),
    #[error("the TLS server name is not a host name")]
    BadServerName,
    #[error("not an HTTP/1 request: {0}")]
    NotHttp(String),
    #[error("more than {MAX_HEADERS} request headers")]
    TooManyHeaders,
    #[error("CONNECT is not served")]
    Connect,
    #[error("two Host headers")]
    DuplicateHost,
    #[error("the Host header is not a host")]
    BadHost,
    #[error("the request target is not an http URI")]
    BadTarget,
    #[error("the request target names {target} but the Host header {host}")]
    TargetHostMismatch { target: String, host: String },
    #[error("the request's body length is ambiguous: {0}")]
    AmbiguousLength(&'static str),
    #[error("an encrypted ClientHello (ECH or ESNI, extension {0:#06x}) hides the server name the proxy judges")]
    EncryptedHello(u16),
    #[error("an upgrade to anything but a WebSocket is not served: {0}")]
    Upgrade(&'static str),
}

/// Sniff the first bytes of a connection to `port` (443: TLS, 80: HTTP).
pub fn sniff(port: u16, buf: &[u8]) -> Sniff {
    match port {
        443 => tls_server_name(buf),
        80 => http_host(buf),
        other => Sniff::Refused(SniffError::UnsupportedPort(other)),
    }
}

/// The canonical form of a host the client named: a name, or an IP literal's canonical text.
pub fn canonical_host(host: &str) -> Option<String> {
    if let Some(name) = normalize_name(host) {
        return Some(name);
    }
    if looks_like_ip(host) {
        return parse_ip_literal(host).map(|ip| ip.to_string());
    }
    None
}

// ---- TLS -----------------------------------------------------------------------------------

/// Bounds-checked reads from a byte slice.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(rest: &'a [u8]) -> Self {
        Reader { rest }
    }
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.rest.len() {
            return None;
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Some(head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }
    fn u24(&mut self) -> Option<usize> {
        self.take(3)
            .map(|b| (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2]))
    }
    fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }
}

/// The server name of the TLS ClientHello at the start of `buf`.
pub fn tls_server_name(buf: &[u8]) -> Sniff {
    let buf = &buf[..buf.len().min(MAX_HEAD)];
    let mut handshake: Vec<u8> = Vec::new();
    let mut pos = 0;
    loop {
        let Some(header) = buf.get(pos..pos + 5) else {
            // A first byte that cannot start a handshake record is refused at once.
            if buf.get(pos).is_some_and(|&t| t != 22) {
                return Sniff::Refused(SniffError::NotTls);
            }
            return need_more(pos + 5);
        };
        let (content_type, major) = (header[0], header[1]);
        let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
        if content_type != 22 || major != 3 {
            return Sniff::Refused(SniffError::NotTls);
        }
        if len == 0 || len > MAX_RECORD {
            return Sniff::Refused(SniffError::MalformedTls("record length"));
        }
        let end = pos + 5 + len;
        let Some(fragment) = buf.get(pos + 5..end) else {
            return need_more(end);
        };
        handshake.extend_from_slice(fragment);
        pos = end;
        let mut r = Reader::new(&handshake);
        let (Some(msg_type), Some(msg_len)) = (r.u8(), r.u24()) else {
            continue;
        };
        if msg_type != 1 {
            return Sniff::Refused(SniffError::NotClientHello);
        }
        // The hello's bytes plus at least one record header per 16 KiB must fit in MAX_HEAD.
        if 4 + msg_len + 5 > MAX_HEAD {
            return Sniff::Refused(SniffError::TooLarge);
        }
        if let Some(body) = r.take(msg_len) {
            return match client_hello_server_name(body) {
                Ok(Some(name)) => Sniff::Name(name),
                Ok(None) => Sniff::NoName,
                Err(e) => Sniff::Refused(e),
            };
        }
    }
}

/// NeedMore, unless `needed` bytes can never fit in MAX_HEAD.
fn need_more(needed: usize) -> Sniff {
    if needed > MAX_HEAD {
        Sniff::Refused(SniffError::TooLarge)
    } else {
        Sniff::NeedMore
    }
}

/// The server name in a ClientHello body (after the 4-byte handshake header).
fn client_hello_server_name(body: &[u8]) -> Result<Option<String>, SniffError> {
    let malformed = SniffError::MalformedTls;
    let mut r = Reader::new(body);
    let version = r.u16().ok_or(malformed("version"))?;
    if version >> 8 != 3 {
        return Err(malformed("version"));
    }
    r.take(32).ok_or(malformed("random"))?;
    let sid_len = r.u8().ok_or(malformed("session id"))?;
    if sid_len > 32 {
        return Err(malformed("session id"));
    }
    r.take(usize::from(sid_len))
        .ok_or(malformed("session id"))?;
    let suites_len = usize::from(r.u16().ok_or(malformed("cipher suites"))?);
    if suites_len == 0 || suites_len % 2 != 0 {
        return Err(malformed("cipher suites"));
    }
    r.take(suites_len).ok_or(malformed("cipher suites"))?;
    let comp_len = usize::from(r.u8().ok_or(malformed("compression methods"))?);
    if comp_len == 0 {
        return Err(malformed("compression methods"));
    }
    r.take(comp_len).ok_or(malformed("compression methods"))?;
    if r.is_empty() {
        return Ok(None);
    }
    let ext_len = usize::from(r.u16().ok_or(malformed("extensions"))?);
    let exts = r.take(ext_len).ok_or(malformed("extensions"))?;
    if !r.is_empty() {
        return Err(malformed("bytes after the extensions"));
    }
    let mut r = Reader::new(exts);
    let mut seen = HashSet::new();
    let mut name = None;
    while !r.is_empty() {
        let ext_type = r.u16().ok_or(malformed("extension"))?;
        let len = usize::from(r.u16().ok_or(malformed("extension"))?);
        let data = r.take(len).ok_or(malformed("extension length"))?;
        if !seen.insert(ext_type) {
            return Err(SniffError::DuplicateExtension(ext_type));
        }
        if ext_type == 0 {
            name = Some(server_name_extension(data)?);
        }
        // The outer SNI of an encrypted hello may be an allowed name while the inner one, the
        // host the server then serves, is any other behind the same front. Node never sends
        // one; a tool writing its own TLS gets no such cover.
        if matches!(ext_type, ENCRYPTED_CLIENT_HELLO | ENCRYPTED_SERVER_NAME) {
            return Err(SniffError::EncryptedHello(ext_type));
        }
    }
    Ok(name)
}

/// The TLS extension of an Encrypted Client Hello (RFC 9849), and of its draft predecessor,
/// encrypted SNI.
const ENCRYPTED_CLIENT_HELLO: u16 = 0xfe0d;
const ENCRYPTED_SERVER_NAME: u16 = 0xffce;

/// RFC 6066 3: a ServerNameList holding exactly one host_name.
fn server_name_extension(data: &[u8]) -> Result<String, SniffError> {
    let malformed = SniffError::MalformedTls;
    let mut r = Reader::new(data);
    let list_len = usize::from(r.u16().ok_or(malformed("server name list"))?);
    if list_len != data.len() - 2 {
        return Err(malformed("server name list length"));
    }
    let name_type = r.u8().ok_or(malformed("server name"))?;
    let len = usize::from(r.u16().ok_or(malformed("server name"))?);
    let host = r.take(len).ok_or(malformed("server name length"))?;
    if !r.is_empty() {
        return Err(malformed("more than one server name"));
    }
    if name_type != 0 {
        return Err(malformed("server name type"));
    }
    if host.is_empty() || host.len() > 255 {
        return Err(SniffError::BadServerName);
    }
    let host = std::str::from_utf8(host).map_err(|_| SniffError::BadServerName)?;
    canonical_host(host).ok_or(SniffError::BadServerName)
}

// ---- HTTP ----------------------------------------------------------------------------------

/// The host an HTTP/1 request at the start of `buf` is for.
pub fn http_host(buf: &[u8]) -> Sniff {
    let head = &buf[..buf.len().min(MAX_HEAD)];
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => {
            return if buf.len() >= MAX_HEAD {
                Sniff::Refused(SniffError::TooLarge)
            } else {
                Sniff::NeedMore
            };
        }
        Err(httparse::Error::TooManyHeaders) => return Sniff::Refused(SniffError::TooManyHeaders),
        Err(e) => return Sniff::Refused(SniffError::NotHttp(e.to_string())),
    }
    let headers = || request.headers.iter().map(|h| (h.name, h.value));
    let judged = unambiguous_length(headers())
        .and_then(|()| websocket_upgrade_only(headers()))
        .and_then(|()| {
            host_of(
                request.method.unwrap_or(""),
                request.path.unwrap_or(""),
                headers(),
            )
        });
    match judged {
        Ok(Some(host)) => Sniff::Name(host),
        Ok(None) => Sniff::NoName,
        Err(e) => Sniff::Refused(e),
    }
}

/// The host a request hyper parsed is for (a later request on a kept-alive connection): the
/// same rules as [`http_host`]. Hyper has settled the body length by then (it refuses two
/// different `Content-Length`s and a `Transfer-Encoding` not ending in `chunked`, lets
/// `Transfer-Encoding` win over `Content-Length` and closes after such a request) and sends
/// the upstream a head it wrote itself, so no ambiguity reaches the upstream.
pub fn request_host(
    method: &http::Method,
    uri: &Uri,
    headers: &http::HeaderMap,
) -> Result<Option<String>, SniffError> {
    let target = uri.to_string();
    let pairs = || headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes()));
    websocket_upgrade_only(pairs())?;
    host_of(method.as_str(), &target, pairs())
}

/// A request may ask to upgrade its connection to a WebSocket, and to nothing else: after a
/// `101` the proxy joins the two sockets and judges no further request, so an upgrade to
/// another HTTP (`h2c`, whose requests name any `:authority`) would carry requests for other
/// hosts past it.
fn websocket_upgrade_only<'a>(
    headers: impl Iterator<Item = (&'a str, &'a [u8])>,
) -> Result<(), SniffError> {
    let mut upgrades = 0;
    for (name, value) in headers {
        if name.eq_ignore_ascii_case("http2-settings") {
            return Err(SniffError::Upgrade("an HTTP2-Settings header"));
        }
        if name.eq_ignore_ascii_case("upgrade") {
            upgrades += 1;
            if upgrades > 1 {
                return Err(SniffError::Upgrade("two Upgrade headers"));
            }
            if !value.trim_ascii().eq_ignore_ascii_case(b"websocket") {
                return Err(SniffError::Upgrade("an Upgrade other than websocket"));
            }
        }
    }
    Ok(())
}

/// A request head whose body length two parsers could read differently is refused.
fn unambiguous_length<'a>(
    headers: impl Iterator<Item = (&'a str, &'a [u8])>,
) -> Result<(), SniffError> {
    let (mut lengths, mut encodings) = (0, Vec::new());
    for (name, value) in headers {
        if name.eq_ignore_ascii_case("content-length") {
            lengths += 1;
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            encodings.push(value);
        }
    }
    match (lengths, encodings.as_slice()) {
        (0 | 1, []) => Ok(()),
        (0, [one]) if one.trim_ascii().eq_ignore_ascii_case(b"chunked") => Ok(()),
        (0, [_]) => Err(SniffError::AmbiguousLength(
            "a Transfer-Encoding other than chunked",
        )),
        (0, _) => Err(SniffError::AmbiguousLength("two Transfer-Encoding headers")),
        (_, []) => Err(SniffError::AmbiguousLength("two Content-Length headers")),
        _ => Err(SniffError::AmbiguousLength(
            "both Content-Length and Transfer-Encoding",
        )),
    }
}

fn host_of<'a>(
    method: &str,
    target: &str,
    headers: impl Iterator<Item = (&'a str, &'a [u8])>,
) -> Result<Option<String>, SniffError> {
    if method.eq_ignore_ascii_case("CONNECT") {
        return Err(SniffError::Connect);
    }
    let mut hosts = headers.filter(|(name, _)| name.eq_ignore_ascii_case("host"));
    let host_header = hosts.next();
    if hosts.next().is_some() {
        return Err(SniffError::DuplicateHost);
    }
    let header_host = match host_header {
        Some((_, value)) => Some(authority_host(value).ok_or(SniffError::BadHost)?),
        None => None,
    };
    if target.starts_with('/') || target == "*" {
        return Ok(header_host);
    }
    // Absolute form: the server goes by the target's authority, so it must name the same host.
    let uri: Uri = target.parse().map_err(|_| SniffError::BadTarget)?;
    if !uri
        .scheme_str()
        .is_some_and(|s| s.eq_ignore_ascii_case("http"))
    {
        return Err(SniffError::BadTarget);
    }
    let authority = uri.authority().ok_or(SniffError::BadTarget)?;
    let target_host = authority_host(authority.as_str().as_bytes()).ok_or(SniffError::BadTarget)?;
    match header_host {
        Some(host) if host != target_host => Err(SniffError::TargetHostMismatch {
            target: target_host,
            host,
        }),
        _ => Ok(Some(target_host)),
    }
}

/// The canonical host of a `host[:port]` authority without userinfo.
fn authority_host(value: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(value).ok()?.trim_matches([' ', '\t']);
    if text.is_empty() || text.contains('@') {
        return None;
    }
    let authority: Authority = text.parse().ok()?;
    let host = authority.host();
    // What follows the host must be nothing, or ":" and a port number.
    let after = text.get(host.len()..)?;
    if let Some(port) = after.strip_prefix(':') {
        if !port.is_empty() && (port.len() > 5 || port.parse::<u16>().is_err()) {
            return None;
        }
    } else if !after.is_empty() {
        return None;
    }
    canonical_host(host)
}

/// The bytes that tell the tool its connection was refused, instead of a bare reset: on 443 a
/// fatal TLS `access_denied` alert (TLS has no room for more), on 80 an HTTP response a
/// program can recognise — the code's status (`403`, or `502` when the upstream failed), the
/// [`REFUSAL_HEADER`] with the code, and [`refusal_body`] — and nothing on other ports.
pub fn refusal_reply(port: u16, code: RefusalCode, why: &str) -> Vec<u8> {
    match port {
        443 => vec![0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 49],
        80 => {
            let body = refusal_body(code, why);
            let status = code.status();
            let phrase = if status == 502 {
                "Bad Gateway"
            } else {
                "Forbidden"
            };
            format!(
                "HTTP/1.1 {status} {phrase}\r\nContent-Type: application/json\r\n{REFUSAL_HEADER}: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                code.as_str(),
                body.len()
            )
            .into_bytes()
        }
        _ => Vec::new(),
    }
}

/// The body of a refusal on port 80, the shape of the daemon's own errors:
/// `{"error":{"code":"<code>","message":"openvibe-skill-runner refused this connection: <why>"}}`.
/// `why` is reduced to printable ASCII and 200 characters.
pub fn refusal_body(code: RefusalCode, why: &str) -> String {
    let why: String = why
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                '?'
            }
        })
        .take(200)
        .collect();
    let body = serde_json::json!({
        "error": { "code": code.as_str(), "message": format!("{REFUSAL_MESSAGE} {why}") }
    });
    format!("{body}\n")
}

#[cfg(test)]
mod tests;
