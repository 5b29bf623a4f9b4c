//! What the load client puts on a connection and how it finds the end of a
//! response: the taillab protocol ([`crate::proto`]) or an external server's
//! own protocol (memcached text, redis RESP, HTTP/1.1).
//!
//! The app's [`taillab_core::Client`] draws each request; for external
//! servers it already writes the request in the server's protocol (the
//! adapter apps in [`crate::apps`](mod@crate::apps)), so a [`Wire`] only frames it (taillab)
//! or passes it through (external) and, on the way back, finds where one
//! response ends. External protocols answer in order on each connection, so
//! responses are matched to requests by position; taillab responses carry
//! the request id and may come back out of order (several workers).

use crate::proto::{self, Kind};

/// One response found at the start of the receive buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    /// Bytes of the buffer this response used.
    pub consumed: usize,
    /// The request it answers, when the protocol says (taillab); `None`:
    /// the next outstanding request on this connection.
    pub id: Option<u64>,
    /// ns the request waited in the server's queue (0 when the protocol cannot tell).
    pub queue_ns: u64,
    /// ns the app took (0 when the protocol cannot tell).
    pub service_ns: u64,
    /// The server's receive lag and the clock of its `enqueued` stamp
    /// (taillab servers; `None` when the protocol cannot tell).
    pub server_recv: Option<(crate::tstamp::StampClock, u64)>,
    /// The server answered with an error (the message, shortened).
    pub error: Option<String>,
}

/// A client-side protocol.
pub trait Wire: Send + Sync {
    /// The protocol's name (`taillab`, `memcached`, `redis`, `http`), for messages.
    fn name(&self) -> &'static str;
    /// Appends request `id` carrying `payload` to `out`.
    fn encode(&self, id: u64, payload: &[u8], out: &mut Vec<u8>);
    /// The response at the start of `buf`: `Ok(None)` needs more bytes;
    /// `Err` means the stream is not this protocol (drop the connection).
    fn decode(&self, buf: &[u8]) -> Result<Option<Reply>, String>;
    /// True when responses carry queue and service times (taillab servers).
    fn server_timed(&self) -> bool {
        false
    }
    /// True when responses carry no request id and come back in the order the requests
    /// went out on their connection (memcached's text protocol, RESP, HTTP/1.1).
    fn ordered(&self) -> bool {
        false
    }
    /// Requests to send once, synchronously, before the run (e.g. to fill a
    /// cache so gets hit); their responses are read and discarded.
    fn preload(&self) -> Vec<Vec<u8>> {
        Vec::new()
    }
}

/// The taillab frame protocol.
pub struct TaillabWire {
    /// Cap on a response's payload (bytes, `net.max_frame`); a larger one ends the connection.
    pub max_frame: u32,
}

impl Wire for TaillabWire {
    fn name(&self) -> &'static str {
        "taillab"
    }
    fn encode(&self, id: u64, payload: &[u8], out: &mut Vec<u8>) {
        proto::encode_request(id, payload, out);
    }
    fn decode(&self, buf: &[u8]) -> Result<Option<Reply>, String> {
        match proto::parse(buf, self.max_frame, Kind::Response) {
            Err(e) => Err(e.to_string()),
            Ok(None) => Ok(None),
            Ok(Some(h)) => {
                let error = (h.kind == Kind::Error)
                    .then(|| String::from_utf8_lossy(&buf[h.header_len()..h.frame_len()]).chars().take(200).collect());
                Ok(Some(Reply {
                    consumed: h.frame_len(),
                    id: Some(h.id),
                    queue_ns: h.queue_ns,
                    service_ns: h.service_ns,
                    server_recv: Some(proto::unpack_recv(h.recv)),
                    error,
                }))
            }
        }
    }
    fn server_timed(&self) -> bool {
        true
    }
}

fn find_crlf(buf: &[u8], from: usize) -> Option<usize> {
    buf.get(from..)?.windows(2).position(|w| w == b"\r\n").map(|p| from + p)
}

/// A response line longer than this is not the protocol we expect.
const MAX_LINE: usize = 64 * 1024;

fn reply(consumed: usize, error: Option<String>) -> Result<Option<Reply>, String> {
    Ok(Some(Reply { consumed, id: None, queue_ns: 0, service_ns: 0, server_recv: None, error }))
}

fn no_line_yet(buf: &[u8], from: usize, proto: &str) -> Result<Option<Reply>, String> {
    if buf.len() - from > MAX_LINE {
        Err(format!("no line end in {MAX_LINE} bytes: not a {proto} server"))
    } else {
        Ok(None)
    }
}

/// memcached text protocol: requests pass through; responses are `VALUE …`
/// blocks ended by `END`, or one status line.
pub struct MemcachedWire {
    /// Set requests sent before the run ([`crate::apps::kv_preload`]; empty with `preload=false`).
    pub preload: Vec<Vec<u8>>,
}

impl Wire for MemcachedWire {
    fn name(&self) -> &'static str {
        "memcached"
    }
    fn ordered(&self) -> bool {
        true
    }
    fn encode(&self, _id: u64, payload: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(payload);
    }
    fn decode(&self, buf: &[u8]) -> Result<Option<Reply>, String> {
        let mut pos = 0;
        loop {
            let Some(end) = find_crlf(buf, pos) else {
                return no_line_yet(buf, pos, "memcached");
            };
            let line = &buf[pos..end];
            let next = end + 2;
            if let Some(rest) = line.strip_prefix(b"VALUE ") {
                // VALUE <key> <flags> <bytes> [<cas>]
                let f: Vec<&[u8]> = rest.split(|&c| c == b' ').collect();
                let n: usize = f
                    .get(2)
                    .and_then(|b| std::str::from_utf8(b).ok())
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| format!("bad memcached VALUE line {:?}", String::from_utf8_lossy(line)))?;
                pos = next.saturating_add(n).saturating_add(2);
                if pos > buf.len() {
                    return Ok(None);
                }
                continue;
            }
            if line == b"END" {
                return reply(next, None);
            }
            if pos > 0 {
                return Err(format!("unexpected {:?} inside a memcached get response", String::from_utf8_lossy(line)));
            }
            return match line {
                b"STORED" | b"NOT_STORED" | b"EXISTS" | b"NOT_FOUND" | b"DELETED" | b"TOUCHED" => reply(next, None),
                l if l.starts_with(b"ERROR") || l.starts_with(b"CLIENT_ERROR") || l.starts_with(b"SERVER_ERROR") => {
                    reply(next, Some(String::from_utf8_lossy(l).into_owned()))
                }
                l => Err(format!("unexpected memcached response {:?}", String::from_utf8_lossy(&l[..l.len().min(80)]))),
            };
        }
    }
    fn preload(&self) -> Vec<Vec<u8>> {
        self.preload.clone()
    }
}

/// Redis RESP2: requests pass through; one response is one RESP value.
pub struct RedisWire {
    /// Set requests sent before the run ([`crate::apps::kv_preload`]; empty with `preload=false`).
    pub preload: Vec<Vec<u8>>,
}

/// End of the RESP value starting at `pos` and whether it is an error.
fn resp_value(buf: &[u8], pos: usize, depth: u32) -> Result<Option<(usize, Option<String>)>, String> {
    if depth > 32 {
        return Err("RESP nesting deeper than 32".into());
    }
    let Some(end) = find_crlf(buf, pos) else {
        return if buf.len() - pos > MAX_LINE { Err("no RESP line end: not a redis server".into()) } else { Ok(None) };
    };
    if end == pos {
        // Found by `cargo fuzz`: an empty line has no type byte.
        return Err("empty RESP line: not a redis server".into());
    }
    let t = buf[pos];
    let body = &buf[pos + 1..end];
    let num = || -> Result<i64, String> {
        std::str::from_utf8(body)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| format!("bad RESP length {:?}", String::from_utf8_lossy(body)))
    };
    match t {
        b'+' | b':' => Ok(Some((end + 2, None))),
        b'-' => Ok(Some((end + 2, Some(String::from_utf8_lossy(body).into_owned())))),
        b'$' => {
            let n = num()?;
            if n < 0 {
                return Ok(Some((end + 2, None)));
            }
            let stop = (end + 4).saturating_add(usize::try_from(n).unwrap_or(usize::MAX));
            Ok((stop <= buf.len()).then_some((stop, None)))
        }
        b'*' => {
            let n = num()?;
            let mut p = end + 2;
            for _ in 0..n.max(0) {
                match resp_value(buf, p, depth + 1)? {
                    None => return Ok(None),
                    Some((q, _)) => p = q,
                }
            }
            Ok(Some((p, None)))
        }
        c => Err(format!("unexpected RESP type byte {c:#04x}: not a redis server")),
    }
}

impl Wire for RedisWire {
    fn name(&self) -> &'static str {
        "redis"
    }
    fn ordered(&self) -> bool {
        true
    }
    fn encode(&self, _id: u64, payload: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(payload);
    }
    fn decode(&self, buf: &[u8]) -> Result<Option<Reply>, String> {
        Ok(resp_value(buf, 0, 0)?.map(|(n, error)| Reply {
            consumed: n,
            id: None,
            queue_ns: 0,
            service_ns: 0,
            server_recv: None,
            error,
        }))
    }
    fn preload(&self) -> Vec<Vec<u8>> {
        self.preload.clone()
    }
}

/// HTTP/1.1 keep-alive: requests pass through; a response is a status line,
/// headers, and a body sized by Content-Length or chunked encoding.
pub struct HttpWire;

impl Wire for HttpWire {
    fn name(&self) -> &'static str {
        "http"
    }
    fn ordered(&self) -> bool {
        true
    }
    fn encode(&self, _id: u64, payload: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(payload);
    }
    fn decode(&self, buf: &[u8]) -> Result<Option<Reply>, String> {
        let Some(hend) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            return no_line_yet(buf, 0, "HTTP");
        };
        let head = std::str::from_utf8(&buf[..hend]).map_err(|_| "HTTP header is not UTF-8".to_string())?;
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap_or("");
        let status: u16 =
            status_line.strip_prefix("HTTP/1.").and_then(|s| s.get(2..5)).and_then(|s| s.parse().ok()).ok_or_else(
                || format!("not an HTTP response: {:?}", status_line.chars().take(80).collect::<String>()),
            )?;
        let mut len: Option<usize> = None;
        let mut chunked = false;
        for l in lines {
            let Some((k, v)) = l.split_once(':') else {
                continue;
            };
            let (k, v) = (k.trim(), v.trim());
            if k.eq_ignore_ascii_case("content-length") {
                len = Some(v.parse().map_err(|_| format!("bad Content-Length {v:?}"))?);
            } else if k.eq_ignore_ascii_case("transfer-encoding") && v.to_ascii_lowercase().contains("chunked") {
                chunked = true;
            }
        }
        let body = hend + 4;
        let end = if chunked {
            let mut p = body;
            loop {
                let Some(e) = find_crlf(buf, p) else {
                    return no_line_yet(buf, p, "HTTP");
                };
                let size_txt = std::str::from_utf8(&buf[p..e]).unwrap_or("").split(';').next().unwrap_or("").trim();
                let size = usize::from_str_radix(size_txt, 16).map_err(|_| format!("bad chunk size {size_txt:?}"))?;
                if size == 0 {
                    // No trailers expected from the servers we drive: just the final CRLF.
                    if buf.len() < e + 4 {
                        return Ok(None);
                    }
                    break e + 4;
                }
                p = (e + 4).saturating_add(size);
                if p > buf.len() {
                    return Ok(None);
                }
            }
        } else {
            // Responses to GET without a length (1xx/204/304) have no body.
            body.saturating_add(len.unwrap_or(0))
        };
        if end > buf.len() {
            return Ok(None);
        }
        let error = (status >= 400).then(|| status_line.to_string());
        reply(end, error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_prefixes_incomplete(w: &dyn Wire, msg: &[u8]) {
        for cut in 0..msg.len() {
            assert_eq!(w.decode(&msg[..cut]), Ok(None), "{} prefix {cut}", w.name());
        }
        assert_eq!(w.decode(msg).unwrap().unwrap().consumed, msg.len(), "{}", w.name());
    }

    #[test]
    fn memcached_responses() {
        let w = MemcachedWire { preload: vec![] };
        all_prefixes_incomplete(&w, b"VALUE k 0 5\r\nab\r\nc\r\nEND\r\n");
        all_prefixes_incomplete(&w, b"END\r\n");
        all_prefixes_incomplete(&w, b"STORED\r\n");
        let r = w.decode(b"SERVER_ERROR out of memory\r\nEND\r\n").unwrap().unwrap();
        assert!(r.error.unwrap().contains("out of memory"));
        assert!(w.decode(b"HTTP/1.1 200 OK\r\n").is_err());
    }

    #[test]
    fn redis_responses() {
        let w = RedisWire { preload: vec![] };
        all_prefixes_incomplete(&w, b"+OK\r\n");
        all_prefixes_incomplete(&w, b"$5\r\nab\r\nc\r\n");
        all_prefixes_incomplete(&w, b"$-1\r\n");
        all_prefixes_incomplete(&w, b"*2\r\n$1\r\na\r\n:7\r\n");
        assert!(w.decode(b"-ERR wrong\r\n").unwrap().unwrap().error.is_some());
        assert!(w.decode(b"?\r\n").is_err());
        assert!(w.decode(b"\r\n\r").is_err());
        assert!(w.decode(b"*2\r\n\r\n").is_err());
    }

    #[test]
    fn http_responses() {
        let w = HttpWire;
        all_prefixes_incomplete(&w, b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc");
        all_prefixes_incomplete(&w, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
        let r = w.decode(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n").unwrap().unwrap();
        assert!(r.error.unwrap().contains("404"));
        assert!(w.decode(b"SSH-2.0-OpenSSH\r\n\r\n").is_err());
        // A multi-byte character where the message is cut must not panic.
        let long = format!("{}\r\n\r\n", "é".repeat(60));
        assert!(w.decode(long.as_bytes()).is_err());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3000))]
        /// Whatever a server sends, every decoder decodes, asks for more or
        /// errors; never panics, never consumes more than it was given.
        #[test]
        fn arbitrary_server_bytes_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..96), prefix in 0usize..4) {
            // Start some inputs with a valid-looking prefix so the parsers get past byte 0.
            let heads: [&[u8]; 4] = [b"", b"VALUE k 0 ", b"*3\r\n$", b"HTTP/1.1 200 OK\r\nContent-Length: "];
            let mut b = heads[prefix].to_vec();
            b.extend_from_slice(&bytes);
            let wires: [&dyn Wire; 4] = [&TaillabWire { max_frame: 64 }, &MemcachedWire { preload: vec![] }, &RedisWire { preload: vec![] }, &HttpWire];
            for w in wires {
                if let Ok(Some(r)) = w.decode(&b) {
                    proptest::prop_assert!(r.consumed > 0 && r.consumed <= b.len(), "{} consumed {}", w.name(), r.consumed);
                }
            }
        }
    }

    #[test]
    fn huge_lengths_do_not_overflow() {
        assert_eq!(RedisWire { preload: vec![] }.decode(b"$9223372036854775807\r\n"), Ok(None));
        assert_eq!(MemcachedWire { preload: vec![] }.decode(b"VALUE k 0 18446744073709551615\r\n"), Ok(None));
        assert_eq!(HttpWire.decode(b"HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551615\r\n\r\n"), Ok(None));
        assert_eq!(
            HttpWire.decode(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n"),
            Ok(None)
        );
    }

    #[test]
    fn taillab_error_frames_carry_the_message() {
        let w = TaillabWire { max_frame: 1000 };
        let mut b = Vec::new();
        let recv = proto::pack_recv(crate::tstamp::StampClock::Software, 3);
        proto::encode_response(Kind::Error, 9, 1, 2, recv, b"boom", &mut b);
        let r = w.decode(&b).unwrap().unwrap();
        assert_eq!((r.id, r.queue_ns, r.service_ns, r.error.as_deref()), (Some(9), 1, 2, Some("boom")));
        assert_eq!(r.server_recv, Some((crate::tstamp::StampClock::Software, 3)));
    }
}
