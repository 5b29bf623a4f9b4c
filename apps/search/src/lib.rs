//! search: the leaf node of a search engine (xapian's role in TailBench),
//! built on tantivy.
//!
//! `App::prepare` indexes a corpus once into the data folder (by default
//! English text from three Debian packages: GCIDE dictionary entries, WordNet
//! synsets, the Linux kernel's reST documentation) and writes the index's
//! vocabulary with document frequencies to `vocab.tsv`, so the client can
//! draw query terms without opening the index. A request is a query of 1–3
//! terms combined with AND or OR; the worker returns the top-k documents by
//! BM25 with their ids, titles and snippets. See `README.md`.

#![warn(missing_docs)]
pub mod corpus;
pub mod proto;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};
use rand_xoshiro::Xoshiro256PlusPlus;
use taillab_core::{App, AppError, Client, DataCtx, KeySpec, Params, Server, Worker};
use tantivy::collector::TopDocs;
use tantivy::indexer::NoMergePolicy;
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption, Schema, Value, INDEXED, STORED, STRING, TEXT};
use tantivy::snippet::SnippetGenerator;
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, Searcher, TantivyDocument, Term};

use corpus::Source;
pub use proto::{Hit, Mode};

/// Bump when the index layout or the vocabulary file changes: a data folder
/// stamped with another version is rebuilt.
const DATA_VERSION: &str = "search-v1";

const KEYS: &[KeySpec] = &[
    KeySpec {
        name: "corpus",
        default: "debian",
        help: "`debian` (the packages in `sources`), a folder of text files (one document each), \
               or one text file (one document per line)",
    },
    KeySpec {
        name: "sources",
        default: "gcide,wordnet,linux-doc",
        help: "Debian sources indexed when corpus=debian",
    },
    KeySpec {
        name: "max_docs",
        default: "0",
        help: "at most this many documents per source (0: all)",
    },
    KeySpec {
        name: "popularity",
        default: "zipf",
        help: "query term popularity: zipf (by document frequency rank) or uniform",
    },
    KeySpec {
        name: "zipf_s",
        default: "1.0",
        help: "Zipf exponent of term popularity",
    },
    KeySpec {
        name: "min_hits",
        default: "10",
        help: "draw only terms in at least this many documents",
    },
    KeySpec {
        name: "max_hits",
        default: "10000",
        help: "draw only terms in at most this many documents",
    },
    KeySpec {
        name: "terms",
        default: "1..3",
        help: "terms per query: N or MIN..MAX (uniform)",
    },
    KeySpec {
        name: "mode",
        default: "mixed",
        help: "and, or, or mixed (each query picks one)",
    },
    KeySpec {
        name: "k",
        default: "10",
        help: "hits returned per query (1..=255)",
    },
    KeySpec {
        name: "rank",
        default: "20480",
        help: "best matches ranked in full per query (xapian's MSet size in TailBench; >= k)",
    },
    KeySpec {
        name: "snippets",
        default: "true",
        help: "return a snippet of each hit's text",
    },
];

fn bad(p: &Params, key: &str, expected: &str) -> AppError {
    AppError::BadParam {
        key: key.into(),
        value: p.get(key).unwrap_or_default().into(),
        expected: expected.into(),
    }
}

fn engine(e: impl std::fmt::Display) -> AppError {
    AppError::Engine {
        engine: "tantivy".into(),
        why: e.to_string(),
    }
}

/// Which documents the index holds; decides the data folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Corpus {
    /// `corpus=debian`: these packaged sources, sorted and without duplicates, never empty.
    Debian(Vec<Source>),
    /// `corpus=PATH`: a folder of text files or one text file, canonicalized.
    Files(PathBuf),
}

/// The `--set` keys that decide the index (and so the data folder).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorpusConfig {
    /// Which documents (`corpus` and `sources` keys).
    pub corpus: Corpus,
    /// At most this many documents per source, 0 for all (`max_docs` key).
    pub max_docs: usize,
}

impl CorpusConfig {
    /// Reads and checks the corpus keys; an error names the bad key and what it accepts.
    pub fn from_params(p: &Params) -> Result<Self, AppError> {
        p.check_keys("search", KEYS)?;
        let max_docs = p.get_parsed("max_docs", 0usize, "a document count (0: all)")?;
        let corpus = match p.get("corpus").unwrap_or("debian") {
            "debian" => {
                let list = p.get("sources").unwrap_or("gcide,wordnet,linux-doc");
                let expected = "a comma-separated subset of gcide, wordnet, linux-doc";
                let mut v = Vec::new();
                for s in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    v.push(Source::parse(s).ok_or_else(|| bad(p, "sources", expected))?);
                }
                v.sort();
                v.dedup();
                if v.is_empty() {
                    return Err(bad(p, "sources", expected));
                }
                Corpus::Debian(v)
            }
            path => {
                let pb = PathBuf::from(path);
                let abs = pb.canonicalize().map_err(|_| {
                    bad(
                        p,
                        "corpus",
                        "`debian` or an existing folder of text files or text file",
                    )
                })?;
                Corpus::Files(abs)
            }
        };
        Ok(CorpusConfig { corpus, max_docs })
    }

    /// The data folder's name: `search` for the default corpus, otherwise
    /// `search-` and a hash of the corpus description, so that several
    /// corpora can be prepared side by side.
    pub fn data_name(&self) -> String {
        let d = self.describe();
        if d == CorpusConfig::default().describe() {
            return "search".into();
        }
        let mut h: u64 = 0xCBF2_9CE4_8422_2325;
        for b in d.bytes() {
            h = (h ^ b as u64).wrapping_mul(0x100_0000_01B3);
        }
        format!("search-{h:016x}")
    }

    fn describe(&self) -> String {
        let c = match &self.corpus {
            Corpus::Debian(v) => {
                let n: Vec<&str> = v.iter().map(|s| s.name()).collect();
                format!("debian:{}", n.join(","))
            }
            Corpus::Files(p) => format!("files:{}", p.display()),
        };
        format!("{c};max_docs={}", self.max_docs)
    }
}

impl Default for CorpusConfig {
    fn default() -> Self {
        CorpusConfig {
            corpus: Corpus::Debian(Source::ALL.to_vec()),
            max_docs: 0,
        }
    }
}

/// How often each term of the band is drawn (`popularity` key).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Popularity {
    /// Zipf over terms ranked by document frequency, with this exponent > 0 (`zipf_s` key).
    Zipf(f64),
    /// Every term of the band equally often.
    Uniform,
}

/// How terms combine in the client's queries (`mode` key).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModeChoice {
    /// Every query is a conjunction.
    And,
    /// Every query is a disjunction.
    Or,
    /// Each query is AND or OR with probability ½.
    Mixed,
}

/// How the client draws queries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueryConfig {
    /// How terms are drawn from the band.
    pub popularity: Popularity,
    /// Lower end of the band: terms in fewer documents are never drawn.
    pub min_hits: u64,
    /// Upper end of the band, ≥ max(min_hits, 1): terms in more documents are never drawn.
    pub max_hits: u64,
    /// Terms per query, drawn uniformly from `terms.0..=terms.1`, 1 ≤ min ≤ max ≤ 16.
    pub terms: (u8, u8),
    /// AND, OR or a coin flip per query.
    pub mode: ModeChoice,
    /// Hits asked per query, 1..=255.
    pub k: u8,
    /// Best matches ranked per query, k..=MAX_RANK (`rank` key).
    pub rank: u32,
    /// Whether the server builds a snippet for each hit (`snippets` key).
    pub snippets: bool,
}

impl QueryConfig {
    /// Reads and checks the query keys; an error names the bad key and its allowed range.
    pub fn from_params(p: &Params) -> Result<Self, AppError> {
        p.check_keys("search", KEYS)?;
        let popularity = match p.get("popularity").unwrap_or("zipf") {
            "zipf" => {
                let e = "a Zipf exponent > 0, e.g. 1.0";
                let s: f64 = p.get_parsed("zipf_s", 1.0, e)?;
                if !(s > 0.0 && s.is_finite()) {
                    return Err(bad(p, "zipf_s", e));
                }
                Popularity::Zipf(s)
            }
            "uniform" => Popularity::Uniform,
            _ => return Err(bad(p, "popularity", "zipf or uniform")),
        };
        let min_hits = p.get_parsed("min_hits", 10u64, "a document count")?;
        let max_hits = p.get_parsed("max_hits", 10_000u64, "a document count")?;
        if max_hits < min_hits.max(1) {
            return Err(bad(p, "max_hits", "a document count >= min_hits and >= 1"));
        }
        let te = "N or MIN..MAX with 1 <= MIN <= MAX <= 16, e.g. 1..3";
        let terms = match p.get("terms").unwrap_or("1..3").split_once("..") {
            Some((a, b)) => (a.trim().parse::<u8>().ok(), b.trim().parse::<u8>().ok()),
            None => {
                let n = p.get("terms").unwrap_or("1").trim().parse::<u8>().ok();
                (n, n)
            }
        };
        let terms = match terms {
            (Some(a), Some(b)) if (1..=b).contains(&a) && b <= 16 => (a, b),
            _ => return Err(bad(p, "terms", te)),
        };
        let mode = match p.get("mode").unwrap_or("mixed") {
            "and" => ModeChoice::And,
            "or" => ModeChoice::Or,
            "mixed" => ModeChoice::Mixed,
            _ => return Err(bad(p, "mode", "and, or or mixed")),
        };
        let k: u8 = p.get_parsed("k", 10, "a hit count, 1..=255")?;
        if k == 0 {
            return Err(bad(p, "k", "a hit count, 1..=255"));
        }
        let re = "a match count from k to 1048576 (TailBench's leaf ranks 20480)";
        let rank: u32 = p.get_parsed("rank", 20_480, re)?;
        if rank < k as u32 || rank > MAX_RANK {
            return Err(bad(p, "rank", re));
        }
        let snippets = p.get_parsed("snippets", true, "true or false")?;
        Ok(QueryConfig {
            popularity,
            min_hits,
            max_hits,
            terms,
            mode,
            k,
            rank,
            snippets,
        })
    }
}

/// The deepest ranking a query may ask for (`rank` key): each query sorts up
/// to this many matches, so a larger one costs memory per request.
pub const MAX_RANK: u32 = 1 << 20;

/// The index schema. `title` is stored only (queries search `body`, which
/// starts with the title text in every source); `id` is our document number.
struct Fields {
    id: Field,
    source: Field,
    title: Field,
    body: Field,
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let id = b.add_u64_field("id", STORED | INDEXED);
    let source = b.add_text_field("source", STRING | STORED);
    let title = b.add_text_field("title", STORED);
    let body = b.add_text_field("body", TEXT | STORED);
    (
        b.build(),
        Fields {
            id,
            source,
            title,
            body,
        },
    )
}

fn fields_of(schema: &Schema) -> Result<Fields, AppError> {
    let f = |n: &str| {
        schema.get_field(n).map_err(|_| AppError::DataMissing {
            app: "search".into(),
            why: format!("the index has no `{n}` field (built by another version)"),
        })
    };
    Ok(Fields {
        id: f("id")?,
        source: f("source")?,
        title: f("title")?,
        body: f("body")?,
    })
}

/// Terms the client may draw: lowercase ASCII words. Numbers, hex strings and
/// identifiers with digits are in the index (the kernel docs are full of
/// them) but make poor queries.
fn is_query_word(t: &str) -> bool {
    (2..=40).contains(&t.len()) && t.bytes().all(|b| b.is_ascii_lowercase())
}

/// Builds the index and the vocabulary into `dir`.
fn build(dir: &Path, cc: &CorpusConfig) -> Result<(), AppError> {
    let t0 = Instant::now();
    let (schema, f) = schema();
    let index_dir = dir.join("index");
    std::fs::create_dir_all(&index_dir).map_err(|e| AppError::io(&index_dir, e))?;
    let index = Index::create_in_dir(&index_dir, schema).map_err(engine)?;
    // A large budget leaves few segments to merge; background merges are
    // switched off because we merge everything into one segment at the end
    // (a leaf serves from one optimised segment, as xapian's compacted
    // database did).
    let mut writer: IndexWriter = index.writer(400_000_000).map_err(engine)?;
    writer.set_merge_policy(Box::new(NoMergePolicy));

    let bar = indicatif::ProgressBar::new_spinner();
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} search: {msg} [{elapsed}]")
            .expect("static template"),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    let mut n: u64 = 0;
    let mut per_source = serde_json::Map::new();
    let mut failed: Option<tantivy::TantivyError> = None;
    let mut add = |d: corpus::Doc, n: &mut u64| {
        if failed.is_some() {
            return;
        }
        let mut doc = TantivyDocument::default();
        doc.add_u64(f.id, *n);
        doc.add_text(f.source, d.source);
        doc.add_text(f.title, &d.title);
        doc.add_text(f.body, &d.body);
        if let Err(e) = writer.add_document(doc) {
            failed = Some(e);
        }
        *n += 1;
        if n.is_multiple_of(5000) {
            bar.set_message(format!("indexing {} ({n} documents)", d.source));
        }
    };
    match &cc.corpus {
        Corpus::Debian(sources) => {
            for s in sources {
                bar.set_message(format!("reading {}", s.name()));
                let got = s.read(cc.max_docs, &mut |d| add(d, &mut n))?;
                per_source.insert(s.name().into(), got.into());
            }
        }
        Corpus::Files(p) => {
            let got = corpus::read_custom(p, cc.max_docs, &mut |d| add(d, &mut n))?;
            per_source.insert("custom".into(), got.into());
        }
    }
    if let Some(e) = failed {
        return Err(engine(e));
    }
    if n == 0 {
        return Err(AppError::Prepare {
            app: "search".into(),
            why: "the corpus has no documents; check --set corpus= / sources=".into(),
        });
    }
    bar.set_message(format!("committing {n} documents"));
    writer.commit().map_err(engine)?;
    let segments = index.searchable_segment_ids().map_err(engine)?;
    if segments.len() > 1 {
        bar.set_message(format!("merging {} segments", segments.len()));
        writer.merge(&segments).wait().map_err(engine)?;
    }
    writer.wait_merging_threads().map_err(engine)?;

    bar.set_message("writing vocabulary");
    let reader = index
        .reader_builder()
        .reload_policy(ReloadPolicy::Manual)
        .try_into()
        .map_err(engine)?;
    let searcher = reader.searcher();
    let mut df: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
    for seg in searcher.segment_readers() {
        let inv = seg.inverted_index(f.body).map_err(engine)?;
        let mut stream = inv.terms().stream().map_err(engine)?;
        while stream.advance() {
            let Ok(t) = std::str::from_utf8(stream.key()) else {
                continue;
            };
            if is_query_word(t) {
                *df.entry(t.to_string()).or_default() += stream.value().doc_freq as u64;
            }
        }
    }
    let mut vocab: Vec<(String, u64)> = df.into_iter().collect();
    vocab.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let vpath = dir.join("vocab.tsv");
    let mut w = std::io::BufWriter::new(
        std::fs::File::create(&vpath).map_err(|e| AppError::io(&vpath, e))?,
    );
    for (t, c) in &vocab {
        writeln!(w, "{t}\t{c}").map_err(|e| AppError::io(&vpath, e))?;
    }
    w.flush().map_err(|e| AppError::io(&vpath, e))?;
    let info = serde_json::json!({
        "corpus": cc.describe(),
        "documents": n,
        "per_source": per_source,
        "vocabulary_terms": vocab.len(),
        "build_seconds": t0.elapsed().as_secs_f64(),
        "tantivy": "0.27",
    });
    let ipath = dir.join("corpus.json");
    std::fs::write(&ipath, serde_json::to_string_pretty(&info).expect("json"))
        .map_err(|e| AppError::io(&ipath, e))?;
    bar.finish_with_message(format!(
        "indexed {n} documents, {} query terms, in {:.1} s",
        vocab.len(),
        t0.elapsed().as_secs_f64()
    ));
    Ok(())
}

/// The `search` app (the [`App`] the CLI registers).
pub struct SearchApp;

/// The app, as the CLI's app list holds it.
pub fn app() -> Arc<dyn App> {
    Arc::new(SearchApp)
}

/// Prepares the data if needed and returns its folder.
pub fn prepared_dir(data: &DataCtx, params: &Params) -> Result<PathBuf, AppError> {
    let cc = CorpusConfig::from_params(params)?;
    let name = cc.data_name();
    data.prepare_atomically(&name, DATA_VERSION, |dir| build(dir, &cc))?;
    Ok(data.app_dir(&name))
}

impl App for SearchApp {
    taillab_core::app_info!(
        "search",
        "search-engine leaf (tantivy, BM25 top-k) over GCIDE, WordNet and kernel docs",
        KEYS
    );
    fn prepare(&self, data: &DataCtx, params: &Params) -> Result<(), AppError> {
        QueryConfig::from_params(params)?;
        prepared_dir(data, params).map(|_| ())
    }
    fn server(
        &self,
        data: &DataCtx,
        params: &Params,
        _threads: usize,
    ) -> Result<Arc<dyn Server>, AppError> {
        let dir = prepared_dir(data, params)?;
        Ok(Arc::new(SearchServer::open(&dir)?))
    }
    fn client(
        &self,
        data: &DataCtx,
        params: &Params,
        seed: u64,
    ) -> Result<Box<dyn Client>, AppError> {
        let qc = QueryConfig::from_params(params)?;
        let dir = prepared_dir(data, params)?;
        let vocab = load_vocab(&dir.join("vocab.tsv"))?;
        Ok(Box::new(SearchClient::new(qc, vocab, seed)?))
    }
}

/// Reads `vocab.tsv`: terms with document frequencies, most frequent first.
pub fn load_vocab(path: &Path) -> Result<Vec<(String, u64)>, AppError> {
    let text = std::fs::read_to_string(path).map_err(|e| AppError::io(path, e))?;
    let mut v = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let parsed = line
            .split_once('\t')
            .and_then(|(t, c)| Some((t.to_string(), c.parse().ok()?)));
        v.push(parsed.ok_or_else(|| AppError::DataMissing {
            app: "search".into(),
            why: format!("{}:{} is not `term<TAB>count`", path.display(), i + 1),
        })?);
    }
    Ok(v)
}

/// The index, opened once and shared by all workers.
pub struct SearchServer {
    reader: IndexReader,
    docs: u64,
    dir: PathBuf,
}

impl SearchServer {
    /// Opens the index prepared in `dir` (the folder [`prepared_dir`] returns);
    /// an index built by another version is an `AppError::DataMissing`.
    pub fn open(dir: &Path) -> Result<Self, AppError> {
        let index = Index::open_in_dir(dir.join("index")).map_err(engine)?;
        fields_of(&index.schema())?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(engine)?;
        let docs = reader.searcher().num_docs();
        Ok(SearchServer {
            reader,
            docs,
            dir: dir.to_path_buf(),
        })
    }
}

impl Server for SearchServer {
    fn worker(&self, _index: usize) -> Result<Box<dyn Worker>, AppError> {
        let searcher = self.reader.searcher();
        let fields = fields_of(&searcher.schema().clone())?;
        Ok(Box::new(SearchWorker { searcher, fields }))
    }
    fn report(&self) -> serde_json::Value {
        serde_json::json!({
            "engine": "tantivy 0.27",
            "documents": self.docs,
            "data": self.dir.display().to_string(),
        })
    }
}

/// One worker's searcher (a cheap handle on the shared segments).
pub struct SearchWorker {
    searcher: Searcher,
    fields: Fields,
}

impl SearchWorker {
    fn text(doc: &TantivyDocument, f: Field) -> &str {
        doc.get_first(f).and_then(|v| v.as_str()).unwrap_or("")
    }
}

impl Worker for SearchWorker {
    fn handle(&mut self, req: &[u8], resp: &mut Vec<u8>) -> Result<(), AppError> {
        let q = proto::decode_query(req)?;
        if q.k == 0 {
            return Err(AppError::Request(
                "search request asks for k = 0 hits".into(),
            ));
        }
        let body = self.fields.body;
        let mut clauses: Vec<Box<dyn Query>> = q
            .terms
            .iter()
            .map(|t| {
                Box::new(TermQuery::new(
                    Term::from_field_text(body, t),
                    IndexRecordOption::WithFreqs,
                )) as Box<dyn Query>
            })
            .collect();
        let query: Box<dyn Query> = if clauses.len() == 1 {
            clauses.pop().expect("one clause")
        } else {
            let occur = match q.mode {
                Mode::And => Occur::Must,
                Mode::Or => Occur::Should,
            };
            Box::new(BooleanQuery::new(
                clauses.into_iter().map(|c| (occur, c)).collect(),
            ))
        };
        // Rank the best `rank` matches in full, as TailBench's xapian leaf asks for an
        // MSet of 20480, then return the first k: a deep ranking leaves block-max WAND
        // little to skip, so frequent terms cost what their posting lists hold.
        let depth = q.rank.clamp(q.k as u32, MAX_RANK) as usize;
        let mut top = self
            .searcher
            .search(&*query, &TopDocs::with_limit(depth).order_by_score())
            .map_err(engine)?;
        top.truncate(q.k as usize);
        let snippets = if q.snippets && !top.is_empty() {
            let mut g = SnippetGenerator::create(&self.searcher, &*query, body).map_err(engine)?;
            g.set_max_num_chars(160);
            Some(g)
        } else {
            None
        };
        resp.push(top.len() as u8);
        for (score, addr) in top {
            let doc: TantivyDocument = self.searcher.doc(addr).map_err(engine)?;
            let id = doc
                .get_first(self.fields.id)
                .and_then(|v| v.as_u64())
                .unwrap_or(u64::MAX);
            let snippet = snippets.as_ref().map(|g| g.snippet_from_doc(&doc));
            let frag = snippet.as_ref().map_or("", |s| s.fragment());
            proto::push_hit(resp, score, id, Self::text(&doc, self.fields.title), frag);
        }
        Ok(())
    }
}

/// Draws queries from the vocabulary band.
pub struct SearchClient {
    cfg: QueryConfig,
    rng: Xoshiro256PlusPlus,
    /// Terms within the band, most documents first: Zipf rank 1 is the most
    /// frequent term, the usual assumption that popular queries use common
    /// words.
    terms: Vec<String>,
    zipf: Option<Zipf<f64>>,
}

impl SearchClient {
    /// A client drawing from the terms of `vocab` (term, document frequency;
    /// most frequent first, as [`load_vocab`] returns it) inside `cfg`'s band.
    /// A band that holds no term is an error that gives the index's range.
    pub fn new(cfg: QueryConfig, vocab: Vec<(String, u64)>, seed: u64) -> Result<Self, AppError> {
        let (lo, hi) = (
            vocab.iter().map(|v| v.1).min().unwrap_or(0),
            vocab.iter().map(|v| v.1).max().unwrap_or(0),
        );
        let terms: Vec<String> = vocab
            .into_iter()
            .filter(|(_, c)| (cfg.min_hits..=cfg.max_hits).contains(c))
            .map(|(t, _)| t)
            .collect();
        if terms.is_empty() {
            return Err(AppError::BadParam {
                key: "min_hits/max_hits".into(),
                value: format!("{}..{}", cfg.min_hits, cfg.max_hits),
                expected: format!(
                    "a band that holds some terms: this index's document frequencies run from \
                     {lo} to {hi}"
                ),
            });
        }
        let zipf = match cfg.popularity {
            Popularity::Zipf(s) => {
                Some(
                    Zipf::new(terms.len() as u64, s).map_err(|e| AppError::BadParam {
                        key: "zipf_s".into(),
                        value: s.to_string(),
                        expected: e.to_string(),
                    })?,
                )
            }
            Popularity::Uniform => None,
        };
        Ok(SearchClient {
            cfg,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            terms,
            zipf,
        })
    }

    /// The terms this client draws from, most popular first.
    pub fn terms(&self) -> &[String] {
        &self.terms
    }

    fn draw(&mut self) -> usize {
        match &self.zipf {
            Some(z) => (z.sample(&mut self.rng) as usize).clamp(1, self.terms.len()) - 1,
            None => self.rng.gen_range(0..self.terms.len()),
        }
    }

    /// The next query, before encoding.
    pub fn next_query(&mut self) -> proto::Query {
        let (a, b) = self.cfg.terms;
        let n = (self.rng.gen_range(a..=b) as usize).min(self.terms.len());
        let mut picked: Vec<usize> = Vec::with_capacity(n);
        // Distinct terms; under a steep Zipf the head repeats often, so give
        // up after a few redraws rather than loop on a tiny vocabulary.
        for _ in 0..n * 8 {
            if picked.len() == n {
                break;
            }
            let i = self.draw();
            if !picked.contains(&i) {
                picked.push(i);
            }
        }
        let mode = match self.cfg.mode {
            ModeChoice::And => Mode::And,
            ModeChoice::Or => Mode::Or,
            ModeChoice::Mixed => {
                if self.rng.gen_bool(0.5) {
                    Mode::And
                } else {
                    Mode::Or
                }
            }
        };
        proto::Query {
            mode,
            k: self.cfg.k,
            rank: self.cfg.rank,
            snippets: self.cfg.snippets,
            terms: picked.into_iter().map(|i| self.terms[i].clone()).collect(),
        }
    }
}

impl Client for SearchClient {
    fn next_request(&mut self, out: &mut Vec<u8>) {
        let q = self.next_query();
        proto::encode_query(&q, out);
    }
}
