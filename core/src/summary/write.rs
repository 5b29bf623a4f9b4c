//! Writing a run's folder: the writable check, atomic JSON, request rows, the summary, the
//! interval logs and the records.

use super::*;

/// What to do about a failed write.
pub(super) fn write_hint(e: &std::io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::ENOSPC) | Some(libc::EDQUOT) => {
            "the file system is full: free space there or pick another --out"
        }
        _ => "pick a writable --out",
    }
}

pub(super) fn werr(path: &Path) -> impl FnOnce(std::io::Error) -> ResultError + '_ {
    move |e| ResultError::Write {
        path: path.to_path_buf(),
        source: e,
    }
}

/// Makes `dir` and proves it is writable (before a run, so a long run never
/// ends with nowhere to put its result).
pub fn ensure_writable(dir: &Path) -> Result<(), ResultError> {
    std::fs::create_dir_all(dir).map_err(werr(dir))?;
    let probe = dir.join(".taillab-write-test");
    std::fs::write(&probe, b"ok").map_err(werr(&probe))?;
    std::fs::remove_file(&probe).map_err(werr(&probe))?;
    Ok(())
}

/// Writes `summary.json` atomically (temp file + rename), so a reader or a
/// resumed sweep never sees a half-written one.
pub fn write_json_atomic(path: &Path, v: &impl Serialize) -> Result<(), ResultError> {
    let tmp = path.with_extension("json.tmp");
    let txt = serde_json::to_string_pretty(v).expect("summaries serialize");
    // A failed write (a full disk) leaves neither a summary nor a torn temp file.
    let written = std::fs::write(&tmp, txt + "\n").map_err(werr(&tmp));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written?;
    std::fs::rename(&tmp, path).map_err(werr(path))
}

/// Header of `requests.csv`: the stamps of each request, in ns (the two
/// user-space reads last, so readers of the first nine columns still work).
pub const REQUESTS_CSV_HEADER: &str =
    "id,worker,intended,sent,enqueued,started,finished,completed,measured,enqueued_user,completed_user";

/// One `requests.csv` row (no line end), in [`REQUESTS_CSV_HEADER`]'s order.
pub fn write_request_row(
    w: &mut impl Write,
    id: u64,
    worker: usize,
    measured: bool,
    st: &crate::collector::Stamps,
) -> std::io::Result<()> {
    write!(
        w,
        "{id},{worker},{},{},{},{},{},{},{},{},{}",
        st.intended,
        st.sent,
        st.enqueued,
        st.started,
        st.finished,
        st.completed,
        measured as u8,
        st.enqueued_user,
        st.completed_user
    )
}

/// Writes a run's folder: `hist/*.hlog`, optional `requests.csv`, and
/// `summary.json` last (its presence marks the run finished).
pub fn write_run(
    dir: &Path,
    s: &Summary,
    r: &RunResult,
    save_requests: bool,
) -> Result<(), ResultError> {
    write_run_explained(dir, s, r, save_requests, None)
}

/// [`write_run`] with each request's anatomy (by request index) as the records' `x_*`
/// columns (`record.explain`).
pub fn write_run_explained(
    dir: &Path,
    s: &Summary,
    r: &RunResult,
    save_requests: bool,
    anatomy: Option<&[crate::sections::AnatomyRow]>,
) -> Result<(), ResultError> {
    ensure_writable(dir)?;
    let hist = dir.join("hist");
    std::fs::create_dir_all(&hist).map_err(werr(&hist))?;
    let start =
        r.wall_start + std::time::Duration::from_nanos(r.measure_start.saturating_sub(r.t0));
    let start_s = start
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    let iv = r.spec.interval_ns as f64 / 1e9;
    for (m, name) in METRICS.iter().enumerate() {
        let path = hist.join(format!("{name}.hlog"));
        let mut out = String::new();
        out.push_str(&format!(
            "#[taillab {} {}: {} of {} ({}), ns]\n",
            env!("CARGO_PKG_VERSION"),
            s.app,
            name,
            s.app,
            s.config
        ));
        out.push_str("#[Histogram log format version 1.3]\n");
        out.push_str(&format!(
            "#[StartTime: {start_s:.3} (seconds since epoch), {}]\n",
            rfc3339(start)
        ));
        out.push_str(&format!(
            "#[BaseTime: {start_s:.3} (seconds since epoch)]\n"
        ));
        out.push_str("#[MaxValueDivisor: 1000000.0]\n");
        out.push_str("\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n");
        for b in &r.intervals {
            out.push_str(&format!(
                "Tag={name},{:.3},{:.3},{:.3},{}\n",
                b.index as f64 * iv,
                iv,
                b.max[m] as f64 / 1e6,
                b.hist_b64[m]
            ));
        }
        std::fs::write(&path, out).map_err(werr(&path))?;
    }
    if save_requests {
        if let Some(rec) = &r.records {
            // The ideal's completion of each request, when the run has an ideal: as the
            // summary kept it, or replayed here for a result summarised without it.
            let mut replayed = Vec::new();
            let ideal = match (s.ideal.is_some(), r.ideal_completions.get()) {
                (false, _) => None,
                (true, Some(kept)) => Some(&kept[..]),
                (true, None) => {
                    crate::ideal::ideal_of_run(r, &s.latency_ns["sojourn"], Some(&mut replayed))
                        .ok()
                        .map(|_| &replayed[..])
                }
            };
            write_records(dir, r.spec.record_format, rec, ideal, anatomy)?;
        }
    }
    write_json_atomic(&dir.join("summary.json"), s)
}

/// Writes `rec` as `dir/requests.csv` or `dir/requests.parquet`, streaming (the Parquet
/// writer holds one row group, see [`crate::reqfile`]).
pub(super) fn write_records(
    dir: &Path,
    format: crate::reqfile::RequestFormat,
    rec: &crate::records::Records,
    ideal: Option<&[u64]>,
    anatomy: Option<&[crate::sections::AnatomyRow]>,
) -> Result<(), ResultError> {
    use crate::reqfile::{Extra, Row, RowWriter};
    let path = dir.join(crate::reqfile::file_name(format));
    let extra = Extra {
        ideal: ideal.is_some(),
        anatomy: anatomy.is_some(),
        sender: None,
    };
    let go = || -> std::io::Result<()> {
        let mut w = RowWriter::create(dir, format, extra)?;
        for (i, wk, measured, st) in rec.iter() {
            w.push(&Row {
                id: i,
                worker: wk as u64,
                stamps: st,
                measured,
                ideal_completed: ideal.map(|v| v[i as usize]),
                sender: None,
                anatomy: anatomy.and_then(|a| a.get(i as usize)).copied(),
            })?;
        }
        w.finish()
    };
    go().map_err(werr(&path))
}
