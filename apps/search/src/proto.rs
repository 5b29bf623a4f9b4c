//! The search wire format (little-endian).
//!
//! Request:  `b'S'`, version `2`, mode (`0` AND, `1` OR), `k`, snippets
//!   (`0`/`1`), term count, `u32` ranking depth, then each term as `u8` length
//!   and UTF-8 bytes.
//! Response: `u8` hit count, then per hit (best first): `f32` BM25 score,
//!   `u64` document id, `u16` length and title, `u16` length and snippet
//!   (empty when snippets are off).

use taillab_core::AppError;

const MAGIC: u8 = b'S';
const VERSION: u8 = 2;
/// Header bytes before the terms.
const HEADER: usize = 10;

/// How a query's terms combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Documents with every term.
    And,
    /// Documents with any term.
    Or,
}

/// One query as sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// AND or OR.
    pub mode: Mode,
    /// Hits wanted, best first; the server refuses 0.
    pub k: u8,
    /// Whether each hit carries a snippet (up to 160 characters of its text).
    pub snippets: bool,
    /// How many of the best matches the server ranks in full before it returns
    /// the first `k` (xapian's MSet size); the server ranks at least `k`.
    pub rank: u32,
    /// Terms matched exactly against the body's lowercased tokens, so lowercase;
    /// 1 to 255 of them, each at most 255 bytes.
    pub terms: Vec<String>,
}

/// One hit of a response.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// tantivy's BM25 score; hits come in descending order.
    pub score: f32,
    /// The document's number in indexing order, from 0.
    pub id: u64,
    /// The document's stored title (cut below 64 KiB).
    pub title: String,
    /// Text around the matched terms, empty when snippets are off.
    pub snippet: String,
}

/// Appends `q` in the request format above.
pub fn encode_query(q: &Query, out: &mut Vec<u8>) {
    let mode = match q.mode {
        Mode::And => 0,
        Mode::Or => 1,
    };
    out.extend_from_slice(&[
        MAGIC,
        VERSION,
        mode,
        q.k,
        q.snippets as u8,
        q.terms.len() as u8,
    ]);
    out.extend_from_slice(&q.rank.to_le_bytes());
    for t in &q.terms {
        // Vocabulary terms are at most 40 bytes (tantivy drops longer tokens).
        out.push(t.len() as u8);
        out.extend_from_slice(t.as_bytes());
    }
}

fn short(what: &str) -> AppError {
    AppError::Request(format!(
        "search request truncated in {what}; client and server must be the same taillab version"
    ))
}

/// Decodes a request; a malformed one (bad header or mode, no terms,
/// truncated, trailing bytes, non-UTF-8 term) is an `AppError::Request`.
pub fn decode_query(buf: &[u8]) -> Result<Query, AppError> {
    if buf.len() < HEADER || buf[0] != MAGIC || buf[1] != VERSION {
        return Err(AppError::Request(format!(
            "not a search v{VERSION} request; was it sent by the search client?"
        )));
    }
    let mode = match buf[2] {
        0 => Mode::And,
        1 => Mode::Or,
        m => {
            return Err(AppError::Request(format!(
                "unknown query mode {m} (0 AND, 1 OR)"
            )))
        }
    };
    let (k, snippets, n) = (buf[3], buf[4] != 0, buf[5] as usize);
    let rank = u32::from_le_bytes(buf[6..HEADER].try_into().expect("4 bytes"));
    if n == 0 {
        return Err(AppError::Request("search request has no terms".into()));
    }
    let mut terms = Vec::with_capacity(n);
    let mut pos = HEADER;
    for _ in 0..n {
        let len = *buf.get(pos).ok_or_else(|| short("a term length"))? as usize;
        let bytes = buf
            .get(pos + 1..pos + 1 + len)
            .ok_or_else(|| short("a term"))?;
        let t = std::str::from_utf8(bytes)
            .map_err(|_| AppError::Request("search term is not UTF-8".into()))?;
        terms.push(t.to_string());
        pos += 1 + len;
    }
    if pos != buf.len() {
        return Err(AppError::Request(
            "search request has trailing bytes".into(),
        ));
    }
    Ok(Query {
        mode,
        k,
        snippets,
        rank,
        terms,
    })
}

/// Appends one hit to a response whose count byte is already written;
/// title and snippet are cut at a char boundary below 64 KiB.
pub fn push_hit(out: &mut Vec<u8>, score: f32, id: u64, title: &str, snippet: &str) {
    out.extend_from_slice(&score.to_le_bytes());
    out.extend_from_slice(&id.to_le_bytes());
    for s in [title, snippet] {
        // Cut at a char boundary below 64 KiB; titles and snippets are short.
        let mut end = s.len().min(u16::MAX as usize);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        out.extend_from_slice(&(end as u16).to_le_bytes());
        out.extend_from_slice(&s.as_bytes()[..end]);
    }
}

/// Decodes a response (tests and tools); a truncated one is an `AppError::Request`.
pub fn decode_response(buf: &[u8]) -> Result<Vec<Hit>, AppError> {
    let n = *buf.first().ok_or_else(|| short("the hit count"))? as usize;
    let mut pos = 1;
    let mut take = |len: usize, what: &str| -> Result<&[u8], AppError> {
        let s = buf.get(pos..pos + len).ok_or_else(|| short(what))?;
        pos += len;
        Ok(s)
    };
    let mut hits = Vec::with_capacity(n);
    for _ in 0..n {
        let score = f32::from_le_bytes(take(4, "a score")?.try_into().expect("4 bytes"));
        let id = u64::from_le_bytes(take(8, "a doc id")?.try_into().expect("8 bytes"));
        let mut text = || -> Result<String, AppError> {
            let len = u16::from_le_bytes(take(2, "a length")?.try_into().expect("2 bytes"));
            Ok(String::from_utf8_lossy(take(len as usize, "a string")?).into_owned())
        };
        let title = text()?;
        let snippet = text()?;
        hits.push(Hit {
            score,
            id,
            title,
            snippet,
        });
    }
    Ok(hits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let q = Query {
            mode: Mode::Or,
            k: 10,
            snippets: true,
            rank: 20_480,
            terms: vec!["kernel".into(), "élan".into()],
        };
        let mut b = Vec::new();
        encode_query(&q, &mut b);
        assert_eq!(decode_query(&b).unwrap(), q);
        for cut in 0..b.len() {
            assert!(decode_query(&b[..cut]).is_err(), "cut {cut}");
        }
        let mut r = vec![1];
        push_hit(&mut r, 1.5, 7, "t", "snip");
        let h = decode_response(&r).unwrap();
        assert_eq!(
            h,
            vec![Hit {
                score: 1.5,
                id: 7,
                title: "t".into(),
                snippet: "snip".into()
            }]
        );
        assert!(decode_response(&r[..r.len() - 1]).is_err());
    }
}
