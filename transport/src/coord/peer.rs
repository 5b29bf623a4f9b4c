//! The other side of the pipes: a client's barrier, its `foreign` feed and its `shard` line,
//! the server's stats line; and the per-request rows the clients send back, written as the
//! run's records.

use super::*;

/// A coordinated client's start: print `ready`, read `go DELAY_NS`.
pub fn barrier() -> Result<u64, TransportError> {
    println!("ready");
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| TransportError::Io { what: "reading the coordinator's go".into(), source: e })?;
    line.trim().strip_prefix("go ").and_then(|d| d.parse::<u64>().ok()).ok_or_else(|| {
        TransportError::Launch(format!("expected `go DELAY_NS` from the coordinator, got {:?}", line.trim()))
    })
}

/// A coordinated client's further lines from the coordinator, read on a thread of its own
/// until the coordinator closes its stdin; call it after [`barrier`] returned (it would take
/// the `go` line). Each `foreign PCT` (a loopback run with live metrics: other processes' CPU
/// on the host over the last second, % of one CPU) goes to `on_foreign`.
pub fn follow_coordinator(on_foreign: impl Fn(f64) + Send + 'static) {
    let follow = move || {
        for line in std::io::stdin().lines() {
            let Ok(l) = line else { break };
            if let Some(pct) = l.trim().strip_prefix("foreign ").and_then(|v| v.parse::<f64>().ok()) {
                on_foreign(pct);
            }
        }
    };
    // Without the thread the endpoint only lacks the figure; the run does not depend on it.
    let _ = std::thread::Builder::new().name("taillab-coord-in".into()).spawn(follow);
}

/// A coordinated client's report: one `shard {json}` line, then one `req`
/// line per kept record (this client's clock and ids).
pub fn emit_shard(r: &LoadResult, qps: f64, seed: u64) {
    let d = ShardDump::from_load(r, qps, seed);
    println!("shard {}", serde_json::to_string(&d).expect("shards serialize"));
    {
        if let Some(rec) = &r.result.records {
            let mut o = std::io::BufWriter::new(std::io::stdout().lock());
            for (i, wk, measured, st) in rec.iter() {
                let _ = write!(o, "req ")
                    .and_then(|_| taillab_core::summary::write_request_row(&mut o, i, wk, measured, &st))
                    .and_then(|_| writeln!(o));
            }
        }
    }
    let _ = std::io::stdout().flush();
}

/// A server's last line for the coordinator: what it and the app saw.
pub fn emit_server_stats(stats: &crate::server::ServeStats, app_report: Value) {
    // Nobody may be reading any more (a script took the port and left): ignore EPIPE.
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "stats {}", json!({"serve": stats, "app": app_report}));
    let _ = o.flush();
}

/// One `req` line's numbers, in `requests.csv` order. Kept as numbers the
/// moment they arrive: a million requests are 88 MB so, several times that
/// as lines of text.
pub(super) fn parse_req(line: &str) -> Result<ReqRow, TransportError> {
    let mut row = [0u64; 11];
    let mut fields = line.split(',');
    for x in row.iter_mut() {
        *x = fields.next().and_then(|f| f.parse().ok()).ok_or_else(|| bad_shard("req line"))?;
    }
    if fields.next().is_some() {
        return Err(bad_shard("req line"));
    }
    Ok(row)
}

/// The clients' request rows as records. One client's keep their ids (a
/// request that never completed has no line and leaves a hole); several
/// clients' are merged in order of intended send time and numbered 0, 1, …
/// in that order.
pub(super) fn records_of(clients: &[Vec<ReqRow>]) -> taillab_core::harness::Records {
    // (intended, client, row): sorted for several clients, as they came for one.
    let mut order: Vec<(u64, u32, u32)> = Vec::new();
    for (i, rows) in clients.iter().enumerate() {
        order.extend(rows.iter().enumerate().map(|(j, v)| (v[2], i as u32, j as u32)));
    }
    if clients.len() > 1 {
        order.sort_unstable();
    }
    let id = |n: usize, v: &ReqRow| if clients.len() > 1 { n as u64 } else { v[0] };
    let len = order.iter().enumerate().map(|(n, o)| id(n, &clients[o.1 as usize][o.2 as usize]) + 1).max();
    let rec = taillab_core::harness::Records::new(len.unwrap_or(0));
    for (n, (_, i, j)) in order.into_iter().enumerate() {
        let v = &clients[i as usize][j as usize];
        let r = reqfile::Row::from_base(v);
        rec.set(id(n, v), &r.stamps, r.worker as usize, r.measured);
    }
    rec
}

/// The records file (`record.format`) of a run with several clients: the integrated columns
/// plus the [`Sender`] column, `client` (ids and clocks are each client's own) or, in a
/// fan-out, `leaf` (a row per leaf's answer, ids the run's).
pub(super) fn write_requests(
    out: &Path,
    format: RequestFormat,
    reqs: &[Vec<ReqRow>],
    sender: Sender,
) -> Result<(), TransportError> {
    let path = out.join(reqfile::file_name(format));
    let io = |e| TransportError::Io { what: format!("writing {}", path.display()), source: e };
    std::fs::create_dir_all(out).map_err(io)?;
    let extra = reqfile::Extra { sender: Some(sender), ..Default::default() };
    let mut w = reqfile::RowWriter::create(out, format, extra).map_err(io)?;
    for (i, rows) in (0u64..).zip(reqs) {
        for r in rows {
            w.push(&reqfile::Row { sender: Some(i), ..reqfile::Row::from_base(r) }).map_err(io)?;
        }
    }
    w.finish().map_err(io)
}
