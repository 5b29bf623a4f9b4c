//! gRPC as the load client speaks it: unary calls over HTTP/2 ([`crate::http2`])
//! with a raw-bytes codec, so no code is generated from `.proto` files.
//!
//! A request is one serialized protobuf message, read from a file or given as
//! hex (`--set request=FILE`, `--set request=hex:0a03616263`), sent as gRPC's
//! length-prefixed message (a compressed flag byte, a 4-byte big-endian
//! length, the bytes) on a `POST` to the method's path with
//! `content-type: application/grpc` and `te: trailers`. The response must be
//! gRPC's too: `content-type: application/grpc…`, at most one length-prefixed
//! message, and a `grpc-status` in the trailers (or in the headers of a
//! trailers-only response). A response that is not gRPC at all (an HTTP
//! server's page, a 404 without gRPC headers) stops the run: the target is
//! not the server the user meant. A gRPC response with a status other than
//! `OK` is a failed request, counted by its status name.

use bytes::{BufMut, Bytes, BytesMut};

/// gRPC's status codes by number (0 = `OK` … 16 = `UNAUTHENTICATED`).
pub const STATUS_NAMES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// The name of status `code` (`CODE_42` for one gRPC does not define).
pub fn status_name(code: u32) -> String {
    STATUS_NAMES.get(code as usize).map(|s| s.to_string()).unwrap_or_else(|| format!("CODE_{code}"))
}

/// Checks a method path, `/package.Service/Method`; the error says what is wrong.
pub fn check_method(m: &str) -> Result<(), String> {
    let shape = "a gRPC method path /package.Service/Method";
    let Some(rest) = m.strip_prefix('/') else {
        return Err(format!("{shape}: it must start with `/`"));
    };
    match rest.split_once('/') {
        Some((svc, meth)) if !svc.is_empty() && !meth.is_empty() && !meth.contains('/') => {}
        _ => return Err(format!("{shape}: a service and a method, each after a `/`")),
    }
    if m.bytes().any(|c| !c.is_ascii_graphic()) {
        return Err(format!("{shape}, without spaces or control characters"));
    }
    Ok(())
}

/// The request message: `hex:…` (an even number of hex digits) or the bytes of a file.
pub fn request_message(v: &str) -> Result<Vec<u8>, String> {
    if let Some(h) = v.strip_prefix("hex:") {
        let h: String = h.chars().filter(|c| !c.is_ascii_whitespace()).collect();
        if !h.len().is_multiple_of(2) || !h.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(format!("`hex:{h}` is not an even number of hex digits"));
        }
        return Ok((0..h.len()).step_by(2).map(|i| u8::from_str_radix(&h[i..i + 2], 16).expect("checked")).collect());
    }
    std::fs::read(v).map_err(|e| format!("cannot read the request file {v}: {e}"))
}

/// `msg` as one uncompressed length-prefixed gRPC message.
pub fn frame(msg: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(5 + msg.len());
    b.put_u8(0);
    b.put_u32(msg.len() as u32);
    b.put_slice(msg);
    b.freeze()
}

/// A call's outcome: its status and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// The gRPC status code (0 = OK).
    pub code: u32,
    /// `grpc-message`, percent-decoded (may be empty).
    pub message: String,
}

impl Status {
    /// `None` for OK; else the error in words (`UNAVAILABLE (14): message`).
    pub fn error(&self) -> Option<String> {
        (self.code != 0).then(|| {
            let mut s = format!("gRPC status {} ({})", status_name(self.code), self.code);
            if !self.message.is_empty() {
                s.push_str(": ");
                s.extend(self.message.chars().take(200));
            }
            s
        })
    }
}

fn header<'a>(h: &'a http::HeaderMap, k: &str) -> Option<&'a str> {
    h.get(k).and_then(|v| v.to_str().ok())
}

fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex =
            b.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b[i], hex) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The status in `h` (trailers, or the headers of a trailers-only response), if it has one.
pub fn status_in(h: &http::HeaderMap) -> Result<Option<Status>, String> {
    let Some(v) = h.get("grpc-status") else {
        return Ok(None);
    };
    let code = v
        .to_str()
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| format!("grpc-status {v:?} is not a number"))?;
    let message = header(h, "grpc-message").map(percent_decode).unwrap_or_default();
    Ok(Some(Status { code, message }))
}

/// Checks a response's head: `Err` when it is not gRPC at all (the run
/// stops); `Ok(Some)` for a trailers-only response, which ends here.
pub fn check_head(status: u16, h: &http::HeaderMap) -> Result<Option<Status>, String> {
    let ct = header(h, "content-type").unwrap_or("");
    if !ct.starts_with("application/grpc") {
        let ct = if ct.is_empty() { "none".to_string() } else { ct.chars().take(60).collect() };
        return Err(format!(
            "not a gRPC response: HTTP status {status}, content-type {ct} (is the target a gRPC server, and the method path right?)"
        ));
    }
    if let Some(s) = status_in(h)? {
        return Ok(Some(s));
    }
    if status != 200 {
        // gRPC servers answer 200; a proxy's error on the way is an UNKNOWN failure here.
        return Ok(Some(Status { code: 2, message: format!("HTTP status {status}") }));
    }
    Ok(None)
}

/// Checks that a unary response's body is at most one length-prefixed
/// message, fed with the body's data frames as they come.
#[derive(Debug, Default)]
pub struct BodyCheck {
    head: Vec<u8>,
    total: u64,
}

impl BodyCheck {
    /// Takes the next chunk of the body.
    pub fn feed(&mut self, b: &[u8]) {
        let want = 5usize.saturating_sub(self.head.len()).min(b.len());
        self.head.extend_from_slice(&b[..want]);
        self.total += b.len() as u64;
    }

    /// After the last chunk: `Err` when the body is not one gRPC message.
    pub fn finish(&self) -> Result<(), String> {
        if self.total == 0 {
            return Ok(());
        }
        let ok = self.head.len() == 5 && self.head[0] <= 1 && {
            let n = u32::from_be_bytes([self.head[1], self.head[2], self.head[3], self.head[4]]);
            self.total == 5 + n as u64
        };
        if ok {
            Ok(())
        } else {
            Err(format!("not a gRPC response: a body of {} bytes that is not one length-prefixed message", self.total))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn method_paths() {
        assert!(check_method("/taillab.Echo/Echo").is_ok());
        for bad in ["taillab.Echo/Echo", "/Echo", "/a/", "//m", "/a/b/c", "/a b/c", ""] {
            assert!(check_method(bad).is_err(), "{bad}");
        }
        assert!(check_method("Echo").unwrap_err().contains("start with `/`"));
    }

    #[test]
    fn request_from_hex_or_file() {
        assert_eq!(request_message("hex:0a03 616263").unwrap(), b"\x0a\x03abc");
        assert!(request_message("hex:0a0").is_err());
        assert!(request_message("hex:zz").is_err());
        let e = request_message("/nonexistent/req.bin").unwrap_err();
        assert!(e.contains("/nonexistent/req.bin"), "{e}");
        assert_eq!(&frame(b"abc")[..], b"\0\0\0\0\x03abc");
    }

    #[test]
    fn statuses_and_heads() {
        let mut h = http::HeaderMap::new();
        assert!(check_head(200, &h).unwrap_err().contains("content-type none"));
        h.insert("content-type", "text/html".parse().unwrap());
        assert!(check_head(405, &h).unwrap_err().contains("HTTP status 405"));
        h.insert("content-type", "application/grpc+proto".parse().unwrap());
        assert_eq!(check_head(200, &h), Ok(None));
        h.insert("grpc-status", "14".parse().unwrap());
        h.insert("grpc-message", "no%20backend%zz".parse().unwrap());
        let s = check_head(200, &h).unwrap().unwrap();
        assert_eq!(s.error().unwrap(), "gRPC status UNAVAILABLE (14): no backend%zz");
        assert_eq!(status_name(42), "CODE_42");
        assert_eq!(Status { code: 0, message: String::new() }.error(), None);
        h.insert("grpc-status", "x".parse().unwrap());
        assert!(status_in(&h).is_err());
    }

    #[test]
    fn bodies() {
        let mut b = BodyCheck::default();
        for part in frame(b"hello").chunks(2) {
            b.feed(part);
        }
        assert!(b.finish().is_ok());
        let mut b = BodyCheck::default();
        b.feed(b"<html>");
        assert!(b.finish().is_err());
        assert!(BodyCheck::default().finish().is_ok());
    }
}
