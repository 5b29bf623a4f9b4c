//! translate: English→Spanish machine translation with Apertium, the role
//! TailBench's moses played.
//!
//! Each worker thread owns one resident Apertium pipeline (see
//! [`pipeline`]); a request is one English sentence (UTF-8), the response its
//! Spanish translation. The input set is built by `taillab data prepare
//! translate` from WordNet usage examples and GCIDE quotations (see
//! [`corpus`]).

#![warn(missing_docs)]
pub mod corpus;
pub mod pipeline;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use taillab_core::app::{App, AppError, Client, DataCtx, KeySpec, Params, Server, Worker};

use crate::corpus::Source;
use crate::pipeline::{Pipeline, PipelineError, Stage};

const NAME: &str = "translate";
/// Bump when the data folder's format or extraction changes.
const DATA_VERSION: &str = "translate-1";
const SENTENCES: &str = "sentences.tsv";
/// The mode file `apertium eng-spa` runs (Debian `apertium-eng-spa`).
pub const DEFAULT_MODE: &str = "/usr/share/apertium/modes/eng-spa.mode";

const KEYS: &[KeySpec] = &[
    KeySpec {
        name: "corpus",
        default: "mixed",
        help: "which sentences the client sends: wordnet (usage examples, short), gcide (quotations, longer) or mixed (both pools as one)",
    },
    KeySpec {
        name: "timeout_ms",
        default: "5000",
        help: "a request fails, and its pipeline is restarted, when no translation arrives within this many ms",
    },
    KeySpec {
        name: "mode",
        default: DEFAULT_MODE,
        help: "the Apertium .mode file whose stages each worker runs",
    },
];

/// Which sentences the client draws from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CorpusChoice {
    /// WordNet's usage examples only (`corpus=wordnet`).
    Wordnet,
    /// GCIDE's quotations only (`corpus=gcide`).
    Gcide,
    /// Both pools (`corpus=mixed`, the default).
    Mixed,
}

impl CorpusChoice {
    fn from_params(p: &Params) -> Result<Self, AppError> {
        match p.get("corpus").unwrap_or("mixed") {
            "wordnet" => Ok(CorpusChoice::Wordnet),
            "gcide" => Ok(CorpusChoice::Gcide),
            "mixed" => Ok(CorpusChoice::Mixed),
            v => Err(AppError::BadParam {
                key: "corpus".into(),
                value: v.into(),
                expected: "one of wordnet, gcide, mixed".into(),
            }),
        }
    }

    fn takes(self, source: &str) -> bool {
        match self {
            CorpusChoice::Mixed => true,
            CorpusChoice::Wordnet => source == Source::Wordnet.tag(),
            CorpusChoice::Gcide => source == Source::Gcide.tag(),
        }
    }
}

/// The app factory registered by the CLI.
pub struct TranslateApp;

/// The app as the CLI registers it.
pub fn app() -> Arc<dyn App> {
    Arc::new(TranslateApp)
}

fn engine_err(e: PipelineError) -> AppError {
    match e {
        PipelineError::NulInText => AppError::Request(e.to_string()),
        e => AppError::Engine {
            engine: "apertium".into(),
            why: e.to_string(),
        },
    }
}

fn timeout(p: &Params) -> Result<Duration, AppError> {
    let ms: u64 = p.get_parsed("timeout_ms", 5000, "a positive number of milliseconds")?;
    if ms == 0 {
        return Err(AppError::BadParam {
            key: "timeout_ms".into(),
            value: "0".into(),
            expected: "a positive number of milliseconds".into(),
        });
    }
    Ok(Duration::from_millis(ms))
}

/// Reads the prepared sentences as (source tag, sentence) pairs.
pub fn load_sentences(dir: &Path) -> Result<Vec<(String, String)>, AppError> {
    let path = dir.join(SENTENCES);
    let text = std::fs::read_to_string(&path).map_err(|e| AppError::DataMissing {
        app: NAME.into(),
        why: format!("cannot read {}: {e}", path.display()),
    })?;
    Ok(text
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(s, t)| (s.to_string(), t.to_string()))
        .collect())
}

impl App for TranslateApp {
    /// Its requests take about a millisecond: 5 000 per point.
    fn point_length(&self) -> taillab_core::app::PointLength {
        taillab_core::app::PointLength {
            requests: 5_000,
            warmup_requests: Some(200),
            ..Default::default()
        }
    }
    taillab_core::app_info!(
        NAME,
        "English→Spanish translation of one sentence with resident Apertium pipelines (ms)",
        KEYS
    );

    fn prepare(&self, data: &DataCtx, params: &Params) -> Result<(), AppError> {
        params.check_keys(NAME, KEYS)?;
        data.prepare_atomically(NAME, DATA_VERSION, |dir| {
            let sentences =
                corpus::extract(Path::new(corpus::WORDNET_DIR), Path::new(corpus::GCIDE_DICT))
                    .map_err(|e| AppError::Prepare {
                        app: NAME.into(),
                        why: format!(
                            "reading {} and {}: {e} (install wordnet-base and dict-gcide, see apps/translate/apt.txt)",
                            corpus::WORDNET_DIR,
                            corpus::GCIDE_DICT
                        ),
                    })?;
            for src in [Source::Wordnet, Source::Gcide] {
                if !sentences.iter().any(|(s, _)| *s == src) {
                    return Err(AppError::Prepare {
                        app: NAME.into(),
                        why: format!("no {} sentences were found; is the package intact?", src.tag()),
                    });
                }
            }
            let mut out = String::new();
            for (src, s) in &sentences {
                out.push_str(src.tag());
                out.push('\t');
                out.push_str(s);
                out.push('\n');
            }
            let path = dir.join(SENTENCES);
            std::fs::write(&path, out).map_err(|e| AppError::io(&path, e))
        })
    }

    fn server(
        &self,
        _data: &DataCtx,
        params: &Params,
        _threads: usize,
    ) -> Result<Arc<dyn Server>, AppError> {
        Ok(Arc::new(TranslateServer::from_params(params)?))
    }

    fn client(
        &self,
        data: &DataCtx,
        params: &Params,
        seed: u64,
    ) -> Result<Box<dyn Client>, AppError> {
        params.check_keys(NAME, KEYS)?;
        let choice = CorpusChoice::from_params(params)?;
        if !data.is_prepared(NAME, DATA_VERSION) {
            return Err(AppError::DataMissing {
                app: NAME.into(),
                why: format!("{} has no prepared sentences", data.app_dir(NAME).display()),
            });
        }
        let sentences: Vec<String> = load_sentences(&data.app_dir(NAME))?
            .into_iter()
            .filter(|(s, _)| choice.takes(s))
            .map(|(_, t)| t)
            .collect();
        if sentences.is_empty() {
            return Err(AppError::DataMissing {
                app: NAME.into(),
                why: format!("no sentences for corpus {choice:?}"),
            });
        }
        Ok(Box::new(TranslateClient {
            sentences,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        }))
    }
}

struct Shared {
    stages: Vec<Stage>,
    timeout: Duration,
    restarts: AtomicU64,
    failures: AtomicU64,
}

impl Shared {
    /// Starts a pipeline and translates one sentence, so the transducers are
    /// loaded before the first measured request rather than during it.
    fn start(&self) -> Result<Pipeline, AppError> {
        let mut p = Pipeline::spawn(&self.stages, self.timeout).map_err(engine_err)?;
        p.translate("Hello.").map_err(engine_err)?;
        Ok(p)
    }
}

/// The server: the parsed mode file; each worker starts its own pipeline.
pub struct TranslateServer {
    shared: Arc<Shared>,
}

impl TranslateServer {
    /// Parses the mode file named by `params` (checked against the app's keys).
    pub fn from_params(params: &Params) -> Result<Self, AppError> {
        params.check_keys(NAME, KEYS)?;
        let mode = PathBuf::from(params.get("mode").unwrap_or(DEFAULT_MODE));
        let stages = pipeline::parse_mode_file(&mode).map_err(engine_err)?;
        Ok(TranslateServer {
            shared: Arc::new(Shared {
                stages,
                timeout: timeout(params)?,
                restarts: AtomicU64::new(0),
                failures: AtomicU64::new(0),
            }),
        })
    }

    /// A worker with its own warm pipeline (not boxed, for tests and examples).
    pub fn new_worker(&self) -> Result<TranslateWorker, AppError> {
        let pipe = self.shared.start()?;
        Ok(TranslateWorker {
            shared: self.shared.clone(),
            pipe: Some(pipe),
        })
    }
}

impl Server for TranslateServer {
    fn worker(&self, _index: usize) -> Result<Box<dyn Worker>, AppError> {
        Ok(Box::new(self.new_worker()?))
    }

    fn report(&self) -> serde_json::Value {
        serde_json::json!({
            "pipeline_restarts": self.shared.restarts.load(Ordering::Relaxed),
            "failed_requests": self.shared.failures.load(Ordering::Relaxed),
        })
    }
}

/// One worker thread's pipeline.
pub struct TranslateWorker {
    shared: Arc<Shared>,
    pipe: Option<Pipeline>,
}

impl TranslateWorker {
    /// Process ids of this worker's stages (empty while it has none).
    pub fn stage_pids(&self) -> Vec<u32> {
        self.pipe.as_ref().map(|p| p.pids()).unwrap_or_default()
    }
}

impl Worker for TranslateWorker {
    fn handle(&mut self, req: &[u8], resp: &mut Vec<u8>) -> Result<(), AppError> {
        let text = std::str::from_utf8(req).map_err(|_| {
            AppError::Request("a translate request is one English sentence in UTF-8".into())
        })?;
        if self.pipe.is_none() {
            // The restart after the last failure did not succeed: try again.
            self.pipe = Some(self.shared.start()?);
        }
        let pipe = self.pipe.as_mut().expect("set above");
        match pipe.translate(text) {
            Ok(s) => {
                resp.extend_from_slice(s.as_bytes());
                Ok(())
            }
            Err(PipelineError::NulInText) => Err(engine_err(PipelineError::NulInText)),
            Err(e) => {
                // The stream state is unknown: drop (and kill) the whole
                // pipeline and start a fresh one now, so the next request
                // finds a warm pipeline.
                self.shared.failures.fetch_add(1, Ordering::Relaxed);
                self.pipe = None;
                self.shared.restarts.fetch_add(1, Ordering::Relaxed);
                self.pipe = self.shared.start().ok();
                Err(engine_err(e))
            }
        }
    }
}

/// Draws a uniformly random sentence of the chosen pool per request.
pub struct TranslateClient {
    sentences: Vec<String>,
    rng: Xoshiro256PlusPlus,
}

impl Client for TranslateClient {
    fn next_request(&mut self, out: &mut Vec<u8>) {
        let i = self.rng.gen_range(0..self.sentences.len());
        out.extend_from_slice(self.sentences[i].as_bytes());
    }
}
