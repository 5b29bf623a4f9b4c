use super::*;
use crate::queue::Assign;

/// A fan-out run's model is run again without each host cost it measured: taking out a
/// 1 ms release lag takes 1 ms off every request, and `all` is below each single one.
#[test]
fn each_host_cost_is_taken_out_of_the_fanout_model() {
    use crate::fanout::{FanoutHists, FanoutRun, FanoutSpec, Hedge};
    let mut hists = FanoutHists::default();
    for i in 0..2_000u64 {
        hists.service.record(100_000 + (i % 7) * 10_000).unwrap();
        hists.wake.record(40_000).unwrap();
        hists.hedge_lag.record(200_000).unwrap();
    }
    let arrivals: Vec<u64> = (0..5_000u64).map(|i| i * 5_000_000).collect();
    let released = arrivals.iter().map(|a| a + 1_000_000).collect();
    let run = |spec: FanoutSpec, released| FanoutRun {
        spec,
        workers_per_replica: 1,
        hists: FanoutHists::default(),
        per_leaf: Vec::new(),
        arrivals: arrivals.clone(),
        released,
        warmup: 100,
    };
    let mut f = run(
        FanoutSpec {
            leaves: 1,
            replicas: 2,
            hedge: Hedge::After(120_000),
            ..Default::default()
        },
        released,
    );
    f.hists = hists;
    let s = fanout_summary(&f, 3);
    let names: Vec<&str> = s.model_without.iter().map(|w| w.without.as_str()).collect();
    assert_eq!(names, ["send lag", "hedge lag", "wake-ups", "all"]);
    let model = s.model.as_ref().unwrap();
    // Ten rounds of the run's 4 900 counted requests, each 1 ms late.
    assert_eq!(model.requests, 49_000);
    let mean = |n: &str| {
        s.model_without
            .iter()
            .find(|w| w.without == n)
            .unwrap()
            .e2e
            .mean
    };
    let lag = model.e2e.mean - mean("send lag");
    assert!((lag / 1e6 - 1.0).abs() < 0.01, "send lag worth {lag} ns");
    assert!((model.e2e_released.mean - mean("send lag")).abs() < 0.01 * model.e2e.mean);
    for n in ["send lag", "hedge lag", "wake-ups"] {
        assert!(
            mean("all") < mean(n),
            "{n}: {} vs all {}",
            mean(n),
            mean("all")
        );
    }
    // Released on time and no hedge: nothing but the wake-ups to take out.
    let mut g = run(FanoutSpec::default_one(), Vec::new());
    g.hists.service.record(100_000).unwrap();
    g.hists.wake.record(40_000).unwrap();
    let names: Vec<String> = fanout_summary(&g, 3)
        .model_without
        .into_iter()
        .map(|w| w.without)
        .collect();
    assert_eq!(names, ["wake-ups"]);
}

#[test]
fn a_statistic_either_side_lacks_is_left_out_not_null() {
    let (mut e, mut r) = (BTreeMap::new(), BTreeMap::new());
    compare(&mut e, &mut r, "p99", 300.0, 100.0);
    compare(&mut e, &mut r, "mean", f64::NAN, 100.0);
    compare(&mut e, &mut r, "max", 50.0, 0.0);
    assert_eq!(e.keys().collect::<Vec<_>>(), ["max", "p99"]);
    assert_eq!(r.keys().collect::<Vec<_>>(), ["p99"]);
    assert_eq!((e["p99"], r["p99"]), (200.0, 3.0));
    // JSON has no NaN: every value written is a number.
    let text = serde_json::to_string(&(e, r)).unwrap();
    assert!(!text.contains("null"), "{text}");
}

fn reqs(a: &[u64], s: &[u64]) -> Vec<ReplayReq> {
    a.iter()
        .zip(s)
        .enumerate()
        .map(|(i, (&intended, &service))| ReplayReq {
            id: i as u64,
            intended,
            service,
            worker: i % 2,
            measured: i > 0,
        })
        .collect()
}

fn cfg(d: Dispatch, recorded: bool) -> IdealConfig {
    IdealConfig {
        sim: SimConfig {
            servers: 2,
            discipline: Discipline::Fifo,
            dispatch: d,
            seed: 1,
        },
        recorded_workers: recorded,
        time_scale: 1.0,
    }
}

#[test]
fn replay_counts_measured_only_and_uses_recorded_workers() {
    let r = reqs(&[0, 0, 0, 0], &[10, 10, 10, 10]);
    let mut ends = vec![0; 4];
    let st = replay(
        r.clone(),
        &cfg(Dispatch::PerWorker(Assign::Random), true),
        |d| ends[d.id as usize] = d.end,
    )
    .unwrap();
    // Workers 0,1,0,1 from the records: ends 10,10,20,20.
    assert_eq!(ends, [10, 10, 20, 20]);
    assert_eq!(st.replayed, 4);
    assert_eq!(st.hist.len(), 3);
    assert_eq!(st.sum, 10 + 20 + 20);
    let half = IdealConfig {
        time_scale: 0.5,
        ..cfg(Dispatch::Shared, false)
    };
    let st = replay(reqs(&[0, 100], &[10, 10]), &half, |d| {
        if d.id == 1 {
            assert_eq!(d.arrival, 50)
        }
    })
    .unwrap();
    assert_eq!(st.replayed, 2);
    let e = replay(reqs(&[5, 1], &[1, 1]), &half, |_| {}).unwrap_err();
    assert!(e.to_string().contains("order of intended time"), "{e}");
}

#[test]
fn csv_replay_streams_and_names_bad_lines() {
    let dir = std::env::temp_dir().join(format!("taillab-ideal-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let e = CsvRequests::open(&dir).err().unwrap().to_string();
    assert!(e.contains("--save-requests"), "{e}");
    let head = crate::summary::REQUESTS_CSV_HEADER;
    std::fs::write(
        dir.join("requests.csv"),
        format!("{head}\n1,0,5,5,5,5,15,15,1\n0,0,0,0,0,0,10,10,1\n"),
    )
    .unwrap();
    // Out of order: sorted in memory, same result as in order.
    let st = replay_dir(&dir, &cfg(Dispatch::Shared, false)).unwrap();
    assert_eq!((st.replayed, st.sum), (2, 10 + 10));
    std::fs::write(
        dir.join("requests.csv"),
        format!("{head}\n0,0,x,0,0,0,10,10,1\n"),
    )
    .unwrap();
    let e = replay_dir(&dir, &cfg(Dispatch::Shared, false))
        .unwrap_err()
        .to_string();
    assert!(e.contains("line 2"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
