//! The kv wire format: compact, little-endian, self-describing enough that a
//! test can decode both directions and replay them against a model.
//!
//! Request:  `b'K'`, version `1`, `u16` op count, then per op:
//!   - `u8` opcode (0 read, 1 update, 2 insert, 3 scan), the 16-byte key;
//!   - update and insert: `u16` value length and the value;
//!   - scan: `u16` number of records to return.
//!
//! Response: `u16` op count, then per op a `u8` status (0 ok, 1 key missing);
//!   - read that found its key: `u16` length and the value (the whole value
//!     travels back, as in a real get, so tests can check it byte for byte);
//!   - scan: `u16` records visited and a `u64` FNV-1a of their keys and values
//!     (a scan of 100 × 100 B would otherwise dominate the response size).

use taillab_core::AppError;

/// `user` followed by 12 zero-padded digits, as YCSB's ordered keys look.
pub const KEY_LEN: usize = 16;
/// A key as stored and sent: [`KEY_LEN`] ASCII bytes, see [`key`].
pub type Key = [u8; KEY_LEN];
/// Key numbers must fit in the 12 digits.
pub const MAX_KEYS: u64 = 1_000_000_000_000;

const MAGIC: u8 = b'K';
const VERSION: u8 = 1;

/// The key for record number `n` (`n < MAX_KEYS`).
pub fn key(n: u64) -> Key {
    let mut k = *b"user000000000000";
    let mut v = n;
    for i in (4..KEY_LEN).rev() {
        k[i] = b'0' + (v % 10) as u8;
        v /= 10;
    }
    k
}

/// Fills `out` with a value whose first 8 bytes are `tag` and whose remaining
/// bytes follow from it (xorshift stream), so any value read back can be
/// checked for tearing without knowing who wrote it.
pub fn fill_value(tag: u64, out: &mut [u8]) {
    let n = out.len().min(8);
    out[..n].copy_from_slice(&tag.to_le_bytes()[..n]);
    let mut x = tag ^ 0x9E37_79B9_7F4A_7C15;
    for chunk in out[n..].chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        chunk.copy_from_slice(&b[..chunk.len()]);
    }
}

/// True when `v` is a value produced by [`fill_value`] (untorn).
pub fn value_is_consistent(v: &[u8]) -> bool {
    if v.len() < 8 {
        return false;
    }
    let tag = u64::from_le_bytes(v[..8].try_into().expect("8 bytes"));
    let mut w = vec![0u8; v.len()];
    fill_value(tag, &mut w);
    w == v
}

/// The value record `n` holds right after loading. Tags of loaded values
/// have the top bit set; clients' update tags never do.
pub fn initial_value(n: u64, size: usize) -> Vec<u8> {
    let mut v = vec![0u8; size];
    fill_value(n | (1 << 63), &mut v);
    v
}

/// FNV-1a, used for scan checksums.
pub fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x100_0000_01B3);
    }
    h
}
/// FNV-1a's offset basis: the checksum of an empty scan, and where [`fnv1a`] starts.
pub const FNV_OFFSET: u64 = 0xCBF2_9CE4_8422_2325;

/// One decoded op of a request, owning its data (see [`decode_request`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Get the key's value.
    Read(Key),
    /// Replace the key's value (the server upserts: a missing key is created).
    Update(Key, Vec<u8>),
    /// Add a record (an existing key is overwritten).
    Insert(Key, Vec<u8>),
    /// Visit up to this many records in key order, starting at the key.
    Scan(Key, u16),
}

/// One decoded result of a response (see [`decode_response`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpResult {
    /// A read's value, whole.
    Value(Vec<u8>),
    /// Status 1: the key was not found.
    Missing,
    /// An update or insert succeeded.
    Done,
    /// A scan's outcome.
    Scanned {
        /// Records visited (fewer than asked near the end of the table).
        count: u16,
        /// FNV-1a over each visited record's key then value, in order, from [`FNV_OFFSET`].
        checksum: u64,
    },
}

/// Writes the request header; `nops` ops follow through [`push_read`],
/// [`push_write`] and [`push_scan`].
pub fn begin_request(out: &mut Vec<u8>, nops: u16) {
    out.extend_from_slice(&[MAGIC, VERSION]);
    out.extend_from_slice(&nops.to_le_bytes());
}

/// Appends a read of `k`.
pub fn push_read(out: &mut Vec<u8>, k: &Key) {
    out.push(0);
    out.extend_from_slice(k);
}

/// Appends an update (or insert) whose value is `fill_value(tag)`, written
/// straight into the request buffer to avoid a copy.
pub fn push_write(out: &mut Vec<u8>, insert: bool, k: &Key, tag: u64, size: u16) {
    out.push(if insert { 2 } else { 1 });
    out.extend_from_slice(k);
    out.extend_from_slice(&size.to_le_bytes());
    let start = out.len();
    out.resize(start + size as usize, 0);
    fill_value(tag, &mut out[start..]);
}

/// Appends a scan of up to `count` records from `k` upwards.
pub fn push_scan(out: &mut Vec<u8>, k: &Key, count: u16) {
    out.push(3);
    out.extend_from_slice(k);
    out.extend_from_slice(&count.to_le_bytes());
}

/// A cursor over a request or response that reports truncation as an error.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }
    /// The next `n` bytes; an error (`AppError::Request`) when fewer are left.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], AppError> {
        if self.buf.len() - self.pos < n {
            return Err(AppError::Request(format!(
                "kv message truncated at byte {} (needed {n} more, {} left); client and server \
                 must be the same taillab version",
                self.pos,
                self.buf.len() - self.pos
            )));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    /// The next byte.
    pub fn u8(&mut self) -> Result<u8, AppError> {
        Ok(self.take(1)?[0])
    }
    /// The next two bytes as a little-endian `u16`.
    pub fn u16(&mut self) -> Result<u16, AppError> {
        Ok(u16::from_le_bytes(
            self.take(2)?.try_into().expect("2 bytes"),
        ))
    }
    /// The next eight bytes as a little-endian `u64`.
    pub fn u64(&mut self) -> Result<u64, AppError> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().expect("8 bytes"),
        ))
    }
    /// The next [`KEY_LEN`] bytes as a key, borrowed.
    pub fn key(&mut self) -> Result<&'a Key, AppError> {
        Ok(self.take(KEY_LEN)?.try_into().expect("KEY_LEN bytes"))
    }
    /// True when every byte has been read.
    pub fn is_empty(&self) -> bool {
        self.pos == self.buf.len()
    }
}

/// Reads the request header and returns the op count.
pub fn read_header(r: &mut Reader) -> Result<u16, AppError> {
    let h = r.take(2)?;
    if h != [MAGIC, VERSION] {
        return Err(AppError::Request(format!(
            "not a kv v{VERSION} request (header {h:?}); was it sent by the kv client?"
        )));
    }
    r.u16()
}

/// A borrowed op, as the server sees it (no copies on the hot path).
pub enum OpRef<'a> {
    /// Get the key's value.
    Read(&'a Key),
    /// Update or insert; the server upserts either way.
    Write {
        /// Opcode 2 (insert) rather than 1 (update).
        insert: bool,
        /// The record's key.
        key: &'a Key,
        /// The new value.
        value: &'a [u8],
    },
    /// Visit up to this many records in key order, starting at the key.
    Scan(&'a Key, u16),
}

/// Reads one op; an unknown opcode or a truncated op is an `AppError::Request`.
pub fn read_op<'a>(r: &mut Reader<'a>) -> Result<OpRef<'a>, AppError> {
    let code = r.u8()?;
    let key = r.key()?;
    Ok(match code {
        0 => OpRef::Read(key),
        1 | 2 => {
            let n = r.u16()? as usize;
            OpRef::Write {
                insert: code == 2,
                key,
                value: r.take(n)?,
            }
        }
        3 => OpRef::Scan(key, r.u16()?),
        c => {
            return Err(AppError::Request(format!(
                "unknown kv opcode {c} (0..=3 are valid)"
            )))
        }
    })
}

/// Decodes a whole request into owned ops (tests and tools).
pub fn decode_request(buf: &[u8]) -> Result<Vec<Op>, AppError> {
    let mut r = Reader::new(buf);
    let n = read_header(&mut r)?;
    let mut ops = Vec::with_capacity(n as usize);
    for _ in 0..n {
        ops.push(match read_op(&mut r)? {
            OpRef::Read(k) => Op::Read(*k),
            OpRef::Write {
                insert: false,
                key,
                value,
            } => Op::Update(*key, value.to_vec()),
            OpRef::Write {
                insert: true,
                key,
                value,
            } => Op::Insert(*key, value.to_vec()),
            OpRef::Scan(k, c) => Op::Scan(*k, c),
        });
    }
    Ok(ops)
}

/// Decodes a response, given the request it answers (the op kinds say how
/// each result is laid out).
pub fn decode_response(req: &[Op], buf: &[u8]) -> Result<Vec<OpResult>, AppError> {
    let mut r = Reader::new(buf);
    let n = r.u16()? as usize;
    if n != req.len() {
        return Err(AppError::Request(format!(
            "response has {n} results for {} ops",
            req.len()
        )));
    }
    let mut out = Vec::with_capacity(n);
    for op in req {
        let status = r.u8()?;
        out.push(match (op, status) {
            (_, 1) => OpResult::Missing,
            (Op::Read(_), 0) => {
                let len = r.u16()? as usize;
                OpResult::Value(r.take(len)?.to_vec())
            }
            (Op::Scan(..), 0) => OpResult::Scanned {
                count: r.u16()?,
                checksum: r.u64()?,
            },
            (_, 0) => OpResult::Done,
            (_, s) => return Err(AppError::Request(format!("bad status byte {s}"))),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_fixed_width_and_ordered() {
        assert_eq!(&key(42), b"user000000000042");
        assert_eq!(&key(MAX_KEYS - 1), b"user999999999999");
        assert!(key(9) < key(10) && key(99_999) < key(100_000));
    }

    #[test]
    fn values_detect_tearing() {
        let mut v = initial_value(5, 100);
        assert!(value_is_consistent(&v));
        v[50] ^= 1;
        assert!(!value_is_consistent(&v));
        let mut w = vec![0; 8];
        fill_value(3, &mut w);
        assert!(value_is_consistent(&w));
    }

    #[test]
    fn request_round_trip_and_truncation() {
        let mut b = Vec::new();
        begin_request(&mut b, 3);
        push_read(&mut b, &key(1));
        push_write(&mut b, false, &key(2), 77, 20);
        push_scan(&mut b, &key(3), 9);
        let ops = decode_request(&b).unwrap();
        assert_eq!(ops[0], Op::Read(key(1)));
        let Op::Update(k, v) = &ops[1] else {
            panic!("{:?}", ops[1])
        };
        assert_eq!(
            (k, v.len(), &v[..8]),
            (&key(2), 20, &77u64.to_le_bytes()[..])
        );
        assert_eq!(ops[2], Op::Scan(key(3), 9));
        for cut in 0..b.len() {
            assert!(decode_request(&b[..cut]).is_err(), "cut at {cut}");
        }
        assert!(decode_request(b"X1\0\0")
            .unwrap_err()
            .to_string()
            .contains("kv client"));
    }
}
