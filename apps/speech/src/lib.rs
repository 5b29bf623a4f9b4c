//! taillab-speech: speech recognition with PocketSphinx, TailBench's `sphinx`.
//!
//! A request is one whole utterance: byte 0 names the search to decode it
//! with ([`data::Search`]: the full LM or one of the grammars), the rest is
//! its 16 kHz mono samples as little-endian i16. The response is the
//! hypothesis text. Each worker thread owns one decoder (built in
//! [`Server::worker`]), so requests never wait for each other inside the app.
//!
//! The client chooses the search because it knows which set an utterance
//! comes from, as a dialogue system knows which prompt it asked; this keeps
//! the server stateless per request.

#![warn(missing_docs)]

pub mod an4;
pub mod data;
pub mod ffi;
pub mod g722;
pub mod prepare;
pub mod score;
pub mod sources;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use taillab_core::{App, AppError, Client, DataCtx, KeySpec, Params, Server, Worker};

use data::{Search, Utterance, APP, DATA_VERSION};

/// Number of synthesized AN4-style utterances, and the seed they are drawn
/// with: fixed so every machine prepares the same set.
const AN4_COUNT: usize = 250;
const AN4_SEED: u64 = 2026;

const KEYS: &[KeySpec] = &[KeySpec {
    name: "set",
    default: "all",
    help: "input set: all (recorded + an4, the default), recorded (Debian recordings: telephone prompts, read speech, words), an4 (synthesized AN4-style prompts)",
}];

/// The `speech` app: its key (`set`), data preparation, server and client.
pub struct SpeechApp;

/// The app as the CLI registers it.
pub fn app() -> Arc<dyn App> {
    Arc::new(SpeechApp)
}

fn set_param(params: &Params) -> Result<String, AppError> {
    params.check_keys(APP, KEYS)?;
    let set = params.get("set").unwrap_or("all");
    match set {
        "all" | "recorded" | "an4" => Ok(set.to_string()),
        other => Err(AppError::BadParam {
            key: "set".into(),
            value: other.into(),
            expected: "one of all, recorded, an4".into(),
        }),
    }
}

fn ready_dir(data: &DataCtx) -> Result<PathBuf, AppError> {
    if !data.is_prepared(APP, DATA_VERSION) {
        return Err(AppError::DataMissing {
            app: APP.into(),
            why: format!(
                "{} has no prepared {DATA_VERSION} data",
                data.app_dir(APP).display()
            ),
        });
    }
    Ok(data::dir(data))
}

impl App for SpeechApp {
    /// Its requests take 0.2 s on average, seconds at most: the 1 000 a fit needs per point,
    /// one round (three loads take hours with the default set).
    fn point_length(&self) -> taillab_core::PointLength {
        taillab_core::PointLength {
            requests: 1_000,
            warmup_requests: Some(5),
            rounds: Some(1),
            ..Default::default()
        }
    }
    taillab_core::app_info!(
        APP,
        "speech recognition: PocketSphinx decodes recorded and synthesized utterances (tens of ms to seconds)",
        KEYS
    );

    fn prepare(&self, data: &DataCtx, params: &Params) -> Result<(), AppError> {
        set_param(params)?;
        data.prepare_atomically(APP, DATA_VERSION, |dir| {
            prepare::build(dir, AN4_COUNT, AN4_SEED)
        })
    }

    fn server(
        &self,
        data: &DataCtx,
        params: &Params,
        _threads: usize,
    ) -> Result<Arc<dyn Server>, AppError> {
        set_param(params)?;
        let dir = ready_dir(data)?;
        Ok(Arc::new(SpeechServer::new(&dir)))
    }

    fn client(
        &self,
        data: &DataCtx,
        params: &Params,
        seed: u64,
    ) -> Result<Box<dyn Client>, AppError> {
        let set = set_param(params)?;
        let utts = data::load(&ready_dir(data)?, &set)?;
        Ok(Box::new(SpeechClient::new(utts, seed)))
    }
}

/// Shared by all workers: the decoder settings, the prepare-time WER and
/// per-search request counts.
pub struct SpeechServer {
    configs: [ffi::DecoderConfig; 2],
    wer: serde_json::Value,
    served: Arc<[AtomicU64; Search::ALL.len()]>,
}

impl SpeechServer {
    /// A server for an already prepared data folder (tests and examples).
    pub fn new(dir: &std::path::Path) -> Self {
        SpeechServer {
            configs: data::decoder_configs(dir),
            wer: score::read(dir),
            served: Arc::new(Default::default()),
        }
    }
}

impl Server for SpeechServer {
    fn worker(&self, _index: usize) -> Result<Box<dyn Worker>, AppError> {
        let engine = |e: ffi::PsError| AppError::Engine {
            engine: "pocketsphinx".into(),
            why: e.0,
        };
        let [a, b] = &self.configs;
        let decoders = [
            ffi::Decoder::new(a).map_err(engine)?,
            ffi::Decoder::new(b).map_err(engine)?,
        ];
        Ok(Box::new(SpeechWorker {
            decoders,
            samples: Vec::new(),
            served: self.served.clone(),
        }))
    }

    /// The word error rate of every set, source and search (measured when
    /// the data was prepared: requests carry no transcript), the decoder
    /// flags, and how many requests each search served in this run.
    fn report(&self) -> serde_json::Value {
        let served: serde_json::Map<String, serde_json::Value> = Search::ALL
            .iter()
            .zip(self.served.iter())
            .map(|(s, n)| (s.name().to_string(), n.load(Ordering::Relaxed).into()))
            .collect();
        let flags = |c: &ffi::DecoderConfig| {
            let f: Vec<String> = c.extra.iter().map(|(k, v)| format!("{k} {v}")).collect();
            f.join(" ")
        };
        serde_json::json!({
            "wer_at_prepare": self.wer,
            "decoder_flags": { "lm": flags(&self.configs[0]), "an4": flags(&self.configs[1]) },
            "requests_by_search": served,
        })
    }
}

/// One worker's decoders (one per [`data::decoder_configs`] entry) and
/// sample buffer; it decodes one request at a time, never waiting on others.
pub struct SpeechWorker {
    /// See [`data::decoder_configs`]: the LM decoder and the AN4 one.
    decoders: [ffi::Decoder; 2],
    /// Reused sample buffer: the payload is bytes, the decoder wants i16.
    samples: Vec<i16>,
    served: Arc<[AtomicU64; Search::ALL.len()]>,
}

impl Worker for SpeechWorker {
    fn handle(&mut self, req: &[u8], resp: &mut Vec<u8>) -> Result<(), AppError> {
        let (&id, audio) = req
            .split_first()
            .ok_or_else(|| AppError::Request("empty speech request".into()))?;
        let search = Search::from_id(id).ok_or_else(|| {
            AppError::Request(format!("unknown search id {id} in speech request"))
        })?;
        if audio.len() % 2 != 0 {
            return Err(AppError::Request(
                "speech audio must be whole 16-bit samples".into(),
            ));
        }
        self.samples.clear();
        self.samples.extend(
            audio
                .chunks_exact(2)
                .map(|b| i16::from_le_bytes([b[0], b[1]])),
        );
        let engine = |e: ffi::PsError| AppError::Engine {
            engine: "pocketsphinx".into(),
            why: e.0,
        };
        let decoder = &mut self.decoders[data::decoder_index(search)];
        decoder.select(search.decoder_name()).map_err(engine)?;
        let hyp = decoder.decode(&self.samples).map_err(engine)?;
        self.served[search as usize].fetch_add(1, Ordering::Relaxed);
        resp.extend_from_slice(hyp.as_bytes());
        Ok(())
    }
}

/// Draws utterances uniformly from the chosen set.
pub struct SpeechClient {
    utts: Vec<Utterance>,
    rng: Xoshiro256PlusPlus,
}

impl SpeechClient {
    /// A client over `utts` (must not be empty), drawing with `seed`.
    pub fn new(utts: Vec<Utterance>, seed: u64) -> Self {
        SpeechClient {
            utts,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        }
    }
}

/// Appends the request bytes for one utterance to `out`: the search id,
/// then the samples as little-endian i16.
pub fn encode_request(u: &Utterance, out: &mut Vec<u8>) {
    out.reserve(1 + 2 * u.samples.len());
    out.push(u.search as u8);
    for s in &u.samples {
        out.extend_from_slice(&s.to_le_bytes());
    }
}

impl Client for SpeechClient {
    fn next_request(&mut self, out: &mut Vec<u8>) {
        let u = &self.utts[self.rng.gen_range(0..self.utts.len())];
        encode_request(u, out);
    }
}
