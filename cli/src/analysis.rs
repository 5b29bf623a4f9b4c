//! `taillab report` and `taillab compare`: thin doors into the Python
//! analysis package (python/taillab), run with the project's interpreter.

use anyhow::bail;
use std::path::PathBuf;
use std::process::Command;

/// The interpreter that has the analysis package: $TAILLAB_PYTHON, else the
/// repository's .venv next to the binary's workspace, else python3.
fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("TAILLAB_PYTHON") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().ok();
    for anc in exe.iter().flat_map(|e| e.ancestors()) {
        let venv = anc.join(".venv/bin/python");
        if venv.exists() {
            return venv;
        }
    }
    PathBuf::from("python3")
}

/// Runs `python -m taillab ARGS...` and returns its exit code.
pub fn run_python(args: &[String]) -> anyhow::Result<i32> {
    let py = python();
    let probe = Command::new(&py).args(["-c", "import taillab"]).output();
    match probe {
        Err(e) => bail!("cannot run {}: {e}; run `make setup` (it creates .venv) or set TAILLAB_PYTHON", py.display()),
        Ok(o) if !o.status.success() => bail!(
            "the analysis package is not installed for {}; run `make setup` or set TAILLAB_PYTHON to a Python that has python/ installed",
            py.display()
        ),
        Ok(_) => {}
    }
    let mut cmd = Command::new(&py);
    cmd.arg("-m").arg("taillab").args(args);
    if std::env::var_os("MPLCONFIGDIR").is_none() {
        // matplotlib keeps its font cache under HOME otherwise: taillab
        // writes only to results folders and its data folder.
        let dir = taillab_core::DataCtx::from_env().root.join("matplotlib");
        cmd.env("MPLCONFIGDIR", dir);
    }
    let status = cmd.status()?;
    Ok(status.code().unwrap_or(2))
}
