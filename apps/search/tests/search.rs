//! search answers checked against a brute-force BM25 over a corpus the test
//! writes, and against real Debian data (a small slice of it).

use std::collections::HashMap;
use std::path::PathBuf;

use taillab_core::{DataCtx, Params};
use taillab_search::proto::{self, Mode, Query};

fn params(pairs: &[&str]) -> Params {
    Params::parse(pairs.iter().copied()).unwrap()
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("taillab-search-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Lowercased alphanumeric tokens, as tantivy's default tokenizer makes them.
fn tokens(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
        .map(|t| t.to_lowercase())
        .collect()
}

/// Short documents (fewer than 40 tokens, where tantivy's field-norm
/// encoding is exact) over a small vocabulary, so terms co-occur.
fn write_corpus(dir: &std::path::Path) -> Vec<String> {
    let words = [
        "kernel",
        "memory",
        "page",
        "cache",
        "driver",
        "device",
        "lock",
        "queue",
        "thread",
        "socket",
        "buffer",
        "interrupt",
        "timer",
        "network",
        "disk",
        "block",
    ];
    let mut docs = Vec::new();
    let mut x: u64 = 12345;
    for i in 0..60 {
        let len = 3 + i % 25;
        let mut d = Vec::new();
        for _ in 0..len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Skew word choice so document frequencies differ.
            let r = (x % 1000) as f64 / 1000.0;
            d.push(words[((r * r) * words.len() as f64) as usize]);
        }
        let text = d.join(" ");
        std::fs::write(dir.join(format!("doc{i:03}.txt")), &text).unwrap();
        docs.push(text);
    }
    docs
}

/// BM25 as tantivy defines it (k1 = 1.2, b = 0.75, idf with +1 inside the
/// log), summed over the query terms a document contains.
fn bm25(docs: &[Vec<String>], terms: &[String], and: bool) -> Vec<(usize, f32)> {
    let n = docs.len() as f32;
    let avgdl = docs.iter().map(|d| d.len()).sum::<usize>() as f32 / n;
    let df: HashMap<&str, f32> = terms
        .iter()
        .map(|t| {
            (
                t.as_str(),
                docs.iter().filter(|d| d.contains(t)).count() as f32,
            )
        })
        .collect();
    let mut out = Vec::new();
    for (i, d) in docs.iter().enumerate() {
        let present = terms.iter().filter(|t| d.contains(t)).count();
        if present == 0 || (and && present < terms.len()) {
            continue;
        }
        let mut s = 0.0;
        for t in terms {
            let tf = d.iter().filter(|w| *w == t).count() as f32;
            if tf == 0.0 {
                continue;
            }
            let idf = (1.0 + (n - df[t.as_str()] + 0.5) / (df[t.as_str()] + 0.5)).ln();
            s += idf * tf * 2.2 / (tf + 1.2 * (1.0 - 0.75 + 0.75 * d.len() as f32 / avgdl));
        }
        out.push((i, s));
    }
    out.sort_by(|a, b| b.1.total_cmp(&a.1));
    out
}

fn run(worker: &mut Box<dyn taillab_core::Worker>, q: &Query) -> Vec<proto::Hit> {
    let (mut req, mut resp) = (Vec::new(), Vec::new());
    proto::encode_query(q, &mut req);
    worker.handle(&req, &mut resp).unwrap();
    proto::decode_response(&resp).unwrap()
}

#[test]
fn top_k_matches_brute_force_bm25() {
    let corpus = scratch("bm25-corpus");
    let texts = write_corpus(&corpus);
    let data = DataCtx {
        root: scratch("bm25-data"),
    };
    let set = format!("corpus={}", corpus.display());
    let p = params(&[&set]);
    let app = taillab_search::app();
    let server = app.server(&data, &p, 1).unwrap();
    let mut w = server.worker(0).unwrap();
    // Custom files are read in path order, so doc id i is doc{i:03}.txt.
    let docs: Vec<Vec<String>> = texts.iter().map(|t| tokens(t)).collect();
    let cases: &[(&[&str], Mode)] = &[
        (&["kernel"], Mode::Or),
        (&["block"], Mode::Or),
        (&["memory", "lock"], Mode::And),
        (&["memory", "lock"], Mode::Or),
        (&["page", "cache", "timer"], Mode::Or),
        (&["kernel", "memory", "page"], Mode::And),
    ];
    let mut compared = 0;
    for (terms, mode) in cases {
        let terms: Vec<String> = terms.iter().map(|s| s.to_string()).collect();
        let q = Query {
            mode: *mode,
            k: 10,
            snippets: true,
            rank: 20_480,
            terms: terms.clone(),
        };
        let hits = run(&mut w, &q);
        // Ranking only the best k (block-max WAND prunes) gives the same scores.
        let shallow = run(
            &mut w,
            &Query {
                rank: 10,
                ..q.clone()
            },
        );
        let scores = |h: &[proto::Hit]| h.iter().map(|h| h.score).collect::<Vec<_>>();
        assert_eq!(scores(&shallow), scores(&hits), "{terms:?} {mode:?}");
        let want = bm25(&docs, &terms, *mode == Mode::And);
        assert_eq!(hits.len(), want.len().min(10), "{terms:?} {mode:?}");
        for (i, h) in hits.iter().enumerate() {
            if i > 0 {
                assert!(h.score <= hits[i - 1].score, "scores rise at {i}: {hits:?}");
            }
            let (_, score) = want[i];
            // Ties may come in either order; compare scores, then check the
            // document holds the terms the mode requires.
            assert!(
                (h.score - score).abs() < 1e-3 * score.max(1.0),
                "{terms:?}: {h:?} vs {score}"
            );
            let toks = &docs[h.id as usize];
            let present = terms.iter().filter(|t| toks.contains(t)).count();
            assert!(
                present >= if *mode == Mode::And { terms.len() } else { 1 },
                "{h:?}"
            );
            assert_eq!(h.title, format!("doc{:03}.txt", h.id));
            assert!(
                terms
                    .iter()
                    .any(|t| h.snippet.to_lowercase().contains(t.as_str())),
                "{h:?}"
            );
            compared += 1;
        }
    }
    assert!(compared > 30, "only {compared} hits compared");
    // A term in no document returns no hits rather than an error.
    let none = run(
        &mut w,
        &Query {
            mode: Mode::Or,
            k: 5,
            snippets: true,
            rank: 5,
            terms: vec!["zzz".into()],
        },
    );
    assert!(none.is_empty());
    let _ = std::fs::remove_dir_all(&data.root);
    let _ = std::fs::remove_dir_all(&corpus);
}

#[test]
fn client_draws_banded_terms_deterministically() {
    let corpus = scratch("client-corpus");
    write_corpus(&corpus);
    let data = DataCtx {
        root: scratch("client-data"),
    };
    let set = format!("corpus={}", corpus.display());
    let app = taillab_search::app();
    app.prepare(&data, &params(&[&set])).unwrap();
    let dir = taillab_search::prepared_dir(&data, &params(&[&set])).unwrap();
    let vocab = taillab_search::load_vocab(&dir.join("vocab.tsv")).unwrap();
    assert!(
        vocab.windows(2).all(|w| w[0].1 >= w[1].1),
        "vocab not sorted by frequency"
    );
    let (lo, hi) = (vocab[vocab.len() / 2].1, vocab[2].1);
    let band = [
        set.as_str(),
        &format!("min_hits={lo}"),
        &format!("max_hits={hi}"),
        "terms=2..3",
    ];
    let df: HashMap<String, u64> = vocab.iter().cloned().collect();
    let draw = |seed, extra: &str| {
        let mut pairs = band.to_vec();
        pairs.push(extra);
        let mut c = app.client(&data, &params(&pairs), seed).unwrap();
        let mut out = Vec::new();
        for _ in 0..200 {
            let mut b = Vec::new();
            c.next_request(&mut b);
            out.push(proto::decode_query(&b).unwrap());
        }
        out
    };
    let qs = draw(3, "mode=mixed");
    assert_eq!(qs, draw(3, "mode=mixed"));
    assert_ne!(qs, draw(4, "mode=mixed"));
    assert!(qs.iter().any(|q| q.mode == Mode::And) && qs.iter().any(|q| q.mode == Mode::Or));
    for q in &qs {
        assert!((2..=3).contains(&q.terms.len()), "{q:?}");
        for t in &q.terms {
            assert!(
                (lo..=hi).contains(&df[t]),
                "{t} has {} hits, band {lo}..{hi}",
                df[t]
            );
        }
    }
    assert!(draw(3, "popularity=uniform") != qs);
    // An empty band is a clear error naming the frequencies available.
    let e = app
        .client(
            &data,
            &params(&[&set, "min_hits=100000", "max_hits=200000"]),
            1,
        )
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("document frequencies run from"), "{e}");
    let _ = std::fs::remove_dir_all(&data.root);
    let _ = std::fs::remove_dir_all(&corpus);
}

#[test]
fn wordnet_slice_finds_what_it_indexed() {
    // Real data, small: the first 3,000 WordNet synsets.
    let data = DataCtx {
        root: scratch("wordnet-data"),
    };
    let p = params(&[
        "sources=wordnet",
        "max_docs=3000",
        "min_hits=2",
        "max_hits=500",
    ]);
    let app = taillab_search::app();
    let server = app.server(&data, &p, 1).unwrap();
    assert_eq!(server.report()["documents"], 3000);
    let mut w = server.worker(0).unwrap();
    let mut c = app.client(&data, &p, 9).unwrap();
    let mut with_hits = 0;
    for _ in 0..100 {
        let mut req = Vec::new();
        c.next_request(&mut req);
        let q = proto::decode_query(&req).unwrap();
        let mut resp = Vec::new();
        w.handle(&req, &mut resp).unwrap();
        let hits = proto::decode_response(&resp).unwrap();
        assert!(hits.len() <= 10);
        // Single-term and OR queries always match: every term came from the index.
        if q.terms.len() == 1 || q.mode == Mode::Or {
            assert!(!hits.is_empty(), "{q:?}");
        }
        if let Some(top) = hits.first() {
            with_hits += 1;
            let text = tokens(&format!("{} {}", top.title, top.snippet));
            assert!(q.terms.iter().any(|t| text.contains(t)), "{q:?}: {top:?}");
        }
        assert!(hits.windows(2).all(|h| h[0].score >= h[1].score));
    }
    assert!(with_hits > 50);
    let _ = std::fs::remove_dir_all(&data.root);
}

#[test]
fn bad_input_gives_clear_errors() {
    let app = taillab_search::app();
    let data = DataCtx {
        root: scratch("bad-data"),
    };
    for (set, needle) in [
        ("sources=gcide,britannica", "subset of gcide"),
        ("corpus=/nonexistent/corpus", "existing folder"),
        ("terms=0", "MIN..MAX"),
        ("terms=3..1", "MIN..MAX"),
        ("mode=xor", "and, or"),
        ("popularity=pareto", "zipf or uniform"),
        ("k=0", "1..=255"),
        ("rank=5", "from k to 1048576"),
        ("rank=2000000", "from k to 1048576"),
        ("max_hits=0", ">= min_hits"),
    ] {
        let e = app
            .prepare(&data, &params(&[set]))
            .expect_err(set)
            .to_string();
        assert!(e.contains(needle), "{set}: {e}");
    }
    let corpus = scratch("bad-corpus");
    write_corpus(&corpus);
    let set = format!("corpus={}", corpus.display());
    let server = app.server(&data, &params(&[&set]), 1).unwrap();
    let mut w = server.worker(0).unwrap();
    let mut resp = Vec::new();
    let e = w.handle(b"kernel", &mut resp);
    let _ = std::fs::remove_dir_all(&data.root);
    let _ = std::fs::remove_dir_all(&corpus);
    assert!(e.unwrap_err().to_string().contains("search client"));
}
