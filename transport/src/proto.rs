//! The taillab wire protocol: length-prefixed binary frames.
//!
//! Every frame starts with a fixed header; all integers are little-endian.
//!
//! ```text
//! offset size  field
//!  0     2     magic   "TL" (0x54 0x4C)
//!  2     1     version 2
//!  3     1     kind    1 = request, 2 = response, 3 = error response
//!  4     4     len     payload bytes that follow the header (u32)
//!  8     8     id      request id, chosen by the client, echoed by the server
//! -- responses and error responses only --
//! 16     8     queue   ns the request waited in the server's queue (started − enqueued)
//! 24     8     service ns the app took (finished − started)
//! 32     8     recv    the server's receive lag: bits 0..62 ns between the kernel
//!                      receiving the request and the server reading it, bits 62..64
//!                      the clock of `enqueued` (0 user, 1 kernel software, 2 kernel hardware)
//! then `len` payload bytes (an error response's payload is a UTF-8 message)
//! ```
//!
//! Version history: 1 had no `recv` field (32-byte response header).
//!
//! Only durations cross the wire, never stamps, so client and server need no
//! common clock. The decoder checks the magic, version and kind before it
//! trusts the length, and refuses a length over the cap *before* buffering
//! the payload, so a garbage or hostile stream costs at most one header of
//! memory and one clear error.

/// Bytes of a request header.
pub const REQ_HEADER: usize = 16;
/// Bytes of a response header.
pub const RESP_HEADER: usize = 40;
/// The first two bytes of every frame.
pub const MAGIC: [u8; 2] = *b"TL";
/// The protocol version every header carries; peers of different versions
/// refuse each other.
pub const VERSION: u8 = 2;

/// The largest receive lag the `recv` field holds (≈ 146 years).
const LAG_MASK: u64 = (1 << 62) - 1;

/// Packs the server's receive lag and the clock of its `enqueued` stamp.
pub fn pack_recv(clock: crate::tstamp::StampClock, lag_ns: u64) -> u64 {
    clock.bits() << 62 | lag_ns.min(LAG_MASK)
}

/// What [`pack_recv`] packed.
pub fn unpack_recv(v: u64) -> (crate::tstamp::StampClock, u64) {
    (crate::tstamp::StampClock::from_bits(v >> 62), v & LAG_MASK)
}
/// Default cap on a frame's payload (16 MiB); `--max-frame` changes it.
pub const DEFAULT_MAX_FRAME: u32 = 16 << 20;

/// What a frame is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Client → server: a request and its payload.
    Request = 1,
    /// Server → client: the response, with the server's queue, service and receive lag.
    Response = 2,
    /// Server → client: the app failed the request (same durations; the payload is
    /// the message).
    Error = 3,
}

/// Why a byte stream is not a valid taillab frame stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtoError {
    /// The first bytes are not `TL` (the bytes found).
    #[error("bad magic {0:02x?}: the peer does not speak the taillab protocol (is --target the right port?)")]
    Magic([u8; 2]),
    /// Another protocol version (the one found).
    #[error("protocol version {0}, this taillab speaks {VERSION}: run the same taillab version on both sides")]
    Version(u8),
    /// A kind byte other than 1, 2 or 3.
    #[error("unknown frame kind {0}")]
    Kind(u8),
    /// A kind this side never receives: a response at a server, a request at a client.
    #[error("a {kind:?} frame is not expected in this direction")]
    Direction {
        /// The kind received.
        kind: Kind,
    },
    /// The declared payload is over the cap; refused before it is buffered.
    #[error("frame payload of {len} bytes exceeds the {cap}-byte cap (raise --max-frame on both sides)")]
    TooBig {
        /// Declared payload bytes.
        len: u32,
        /// The cap (`net.max_frame`, bytes).
        cap: u32,
    },
}

/// A decoded frame header (the payload follows it in the buffer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// What the frame is.
    pub kind: Kind,
    /// Request id, chosen by the client and echoed by the server.
    pub id: u64,
    /// Payload bytes after the header.
    pub len: u32,
    /// ns the request waited in the server's queue (started − enqueued); zero in requests.
    pub queue_ns: u64,
    /// ns the app took (finished − started); zero in requests.
    pub service_ns: u64,
    /// The packed `recv` field ([`unpack_recv`]); zero in requests.
    pub recv: u64,
}

impl Header {
    /// Header size of this frame's kind.
    pub fn header_len(&self) -> usize {
        if self.kind == Kind::Request {
            REQ_HEADER
        } else {
            RESP_HEADER
        }
    }

    /// Total frame length (header + payload).
    pub fn frame_len(&self) -> usize {
        self.header_len() + self.len as usize
    }
}

/// Appends a request frame to `out`.
pub fn encode_request(id: u64, payload: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&MAGIC);
    out.push(VERSION);
    out.push(Kind::Request as u8);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(payload);
}

/// Appends a response (or, with `kind = Error`, an error) frame to `out`;
/// `recv` is [`pack_recv`]'s.
pub fn encode_response(
    kind: Kind,
    id: u64,
    queue_ns: u64,
    service_ns: u64,
    recv: u64,
    payload: &[u8],
    out: &mut Vec<u8>,
) {
    debug_assert!(kind != Kind::Request);
    out.extend_from_slice(&MAGIC);
    out.push(VERSION);
    out.push(kind as u8);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&id.to_le_bytes());
    out.extend_from_slice(&queue_ns.to_le_bytes());
    out.extend_from_slice(&service_ns.to_le_bytes());
    out.extend_from_slice(&recv.to_le_bytes());
    out.extend_from_slice(payload);
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"))
}

/// Parses the frame at the start of `buf`.
///
/// `Ok(None)`: not enough bytes yet (read more). `Ok(Some(h))`: a whole
/// frame of `h.frame_len()` bytes is in `buf`, payload at
/// `buf[h.header_len()..h.frame_len()]`. `Err`: the stream is garbage; drop
/// the connection (there is no way to resynchronise a byte stream).
/// `expect` is the kind family this side receives: `Kind::Request` on a
/// server, `Kind::Response` on a client (which also accepts errors).
pub fn parse(buf: &[u8], cap: u32, expect: Kind) -> Result<Option<Header>, ProtoError> {
    // Validate as early as the bytes allow, so garbage is refused after at
    // most 4 bytes rather than after a full header.
    if !buf.is_empty() && buf[0] != MAGIC[0] {
        return Err(ProtoError::Magic([buf[0], buf.get(1).copied().unwrap_or(0)]));
    }
    if buf.len() >= 2 && buf[1] != MAGIC[1] {
        return Err(ProtoError::Magic([buf[0], buf[1]]));
    }
    if buf.len() >= 3 && buf[2] != VERSION {
        return Err(ProtoError::Version(buf[2]));
    }
    if buf.len() < 4 {
        return Ok(None);
    }
    let kind = match buf[3] {
        1 => Kind::Request,
        2 => Kind::Response,
        3 => Kind::Error,
        k => return Err(ProtoError::Kind(k)),
    };
    let ok_dir = match expect {
        Kind::Request => kind == Kind::Request,
        _ => kind != Kind::Request,
    };
    if !ok_dir {
        return Err(ProtoError::Direction { kind });
    }
    if buf.len() < 8 {
        return Ok(None);
    }
    let len = u32_at(buf, 4);
    if len > cap {
        return Err(ProtoError::TooBig { len, cap });
    }
    let hl = if kind == Kind::Request { REQ_HEADER } else { RESP_HEADER };
    if buf.len() < hl {
        return Ok(None);
    }
    let id = u64_at(buf, 8);
    let (queue_ns, service_ns, recv) =
        if kind == Kind::Request { (0, 0, 0) } else { (u64_at(buf, 16), u64_at(buf, 24), u64_at(buf, 32)) };
    let h = Header { kind, id, len, queue_ns, service_ns, recv };
    if buf.len() < h.frame_len() {
        return Ok(None);
    }
    Ok(Some(h))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn request_layout_is_as_documented() {
        let mut b = Vec::new();
        encode_request(0x0102, b"hi", &mut b);
        assert_eq!(&b[..4], b"TL\x02\x01");
        assert_eq!(&b[4..8], &2u32.to_le_bytes());
        assert_eq!(&b[8..16], &0x0102u64.to_le_bytes());
        assert_eq!(&b[16..], b"hi");
    }

    #[test]
    fn errors_name_the_problem() {
        assert!(matches!(parse(b"GET / HTTP/1.1\r\n", 100, Kind::Request), Err(ProtoError::Magic(_))));
        assert_eq!(parse(b"TL\x01", 100, Kind::Request), Err(ProtoError::Version(1)));
        assert_eq!(parse(b"TL\x02\x09", 100, Kind::Request), Err(ProtoError::Kind(9)));
        let mut b = Vec::new();
        encode_request(1, &[0; 200], &mut b);
        let e = parse(&b[..8], 100, Kind::Request).unwrap_err();
        assert_eq!(e, ProtoError::TooBig { len: 200, cap: 100 });
        assert!(e.to_string().contains("--max-frame"));
        assert!(matches!(parse(&b, 1000, Kind::Response), Err(ProtoError::Direction { .. })));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Encode then decode gives back every field, and every strict
        /// prefix asks for more bytes rather than erroring or panicking.
        #[test]
        fn round_trip(id: u64, q: u64, s: u64, lag in 0u64..1 << 62, clock in 0u64..3, payload in proptest::collection::vec(any::<u8>(), 0..300), resp: bool, err: bool) {
            let mut b = Vec::new();
            let kind = if !resp { Kind::Request } else if err { Kind::Error } else { Kind::Response };
            let clock = crate::tstamp::StampClock::from_bits(clock);
            let recv = pack_recv(clock, lag);
            if resp { encode_response(kind, id, q, s, recv, &payload, &mut b) } else { encode_request(id, &payload, &mut b) }
            let expect = if resp { Kind::Response } else { Kind::Request };
            let h = parse(&b, 1 << 20, expect).unwrap().unwrap();
            prop_assert_eq!(h.kind, kind);
            prop_assert_eq!(h.id, id);
            prop_assert_eq!(h.frame_len(), b.len());
            prop_assert_eq!(&b[h.header_len()..h.frame_len()], &payload[..]);
            if resp {
                prop_assert_eq!((h.queue_ns, h.service_ns), (q, s));
                prop_assert_eq!(unpack_recv(h.recv), (clock, lag));
            }
            for cut in 0..b.len() {
                prop_assert_eq!(parse(&b[..cut], 1 << 20, expect), Ok(None));
            }
        }

        /// Any byte stream decodes, asks for more, or errors — never panics,
        /// and never claims a frame longer than the buffer.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64), cap in 0u32..100, req: bool) {
            let expect = if req { Kind::Request } else { Kind::Response };
            if let Ok(Some(h)) = parse(&bytes, cap, expect) {
                prop_assert!(h.frame_len() <= bytes.len());
                prop_assert!(h.len <= cap);
            }
        }

        /// Streams of valid frames with garbage spliced in: still no panic.
        #[test]
        fn valid_prefix_then_garbage(id: u64, tail in proptest::collection::vec(any::<u8>(), 0..40)) {
            let mut b = Vec::new();
            encode_request(id, b"x", &mut b);
            b.extend_from_slice(&tail);
            let h = parse(&b, 16, Kind::Request).unwrap().unwrap();
            let _ = parse(&b[h.frame_len()..], 16, Kind::Request);
        }
    }
}
