use super::*;

fn sample(end_ms: u64, dt_ms: u64, invol: u64) -> Sample {
    Sample {
        t_mono_ns: end_ms * 1_000_000,
        t_wall_ns: 1_000_000_000_000 + end_ms * 1_000_000,
        dt_s: dt_ms as f64 / 1e3,
        harness: ProcSample {
            invol_cs: invol,
            cpu_pct: 50.0,
            ..Default::default()
        },
        threads: vec![ThreadSample {
            tid: 1,
            invol_cs: invol,
            ..Default::default()
        }],
        ..Default::default()
    }
}

#[test]
fn rephase_splits_at_both_edges_and_shares_counts() {
    // One 100 ms sample ending at 200 ms; window 130..170 ms.
    let out = rephase(vec![sample(200, 100, 10)], 130_000_000, 170_000_000);
    let phases: Vec<_> = out.iter().map(|x| x.phase.unwrap()).collect();
    assert_eq!(phases, [Phase::Warmup, Phase::Measured, Phase::After]);
    let dts: Vec<f64> = out.iter().map(|x| (x.dt_s * 1e3).round()).collect();
    assert_eq!(dts, [30.0, 40.0, 30.0]);
    assert_eq!(out.iter().map(|x| x.harness.invol_cs).sum::<u64>(), 10);
    assert_eq!(out.iter().map(|x| x.threads[0].invol_cs).sum::<u64>(), 10);
    assert_eq!(out[1].harness.invol_cs, 4);
    assert!(out.iter().all(|x| x.harness.cpu_pct == 50.0));
    assert_eq!(out[1].t_mono_ns, 170_000_000);
    assert_eq!(
        out[0].t_wall_ns + 70_000_000,
        1_000_000_000_000 + 200_000_000
    );
}

#[test]
fn rephase_keeps_whole_samples_inside_and_outside() {
    let v = vec![
        sample(100, 100, 1),
        sample(200, 100, 1),
        sample(300, 100, 1),
    ];
    let out = rephase(v, 100_000_000, 200_000_000);
    let phases: Vec<_> = out.iter().map(|x| x.phase.unwrap()).collect();
    assert_eq!(phases, [Phase::Warmup, Phase::Measured, Phase::After]);
}

fn entry(ppid: i32, starttime: u64) -> ScanEntry {
    ScanEntry {
        starttime,
        ticks: 0,
        child_ticks: 0,
        ppid,
        comm: "x".into(),
        root: None,
    }
}

#[test]
fn descendants_get_the_nearest_root_and_keep_it_when_reparented() {
    // 100 = harness, 200 = a hog it started (extra pid); 201 the hog's
    // worker; 101 -> 102 a helper tree of the harness; 300 foreign.
    let roots: BTreeSet<i32> = [100, 200].into();
    let mut next: HashMap<i32, ScanEntry> = [
        (100, entry(50, 1)),
        (200, entry(100, 2)),
        (201, entry(200, 3)),
        (101, entry(100, 4)),
        (102, entry(101, 5)),
        (300, entry(1, 6)),
        (50, entry(1, 0)),
    ]
    .into();
    assign_roots(&mut next, &HashMap::new(), &roots);
    let root = |m: &HashMap<i32, ScanEntry>, p: i32| m[&p].root;
    assert_eq!(root(&next, 201), Some(200));
    assert_eq!(root(&next, 200), Some(200));
    assert_eq!(root(&next, 102), Some(100));
    assert_eq!(root(&next, 300), None);
    // The harness's own parent is not the experiment's.
    assert_eq!(root(&next, 50), None);
    // 101 exits; 102 is reparented to init but stays the harness's.
    let mut later: HashMap<i32, ScanEntry> =
        [(100, entry(50, 1)), (102, entry(1, 5)), (103, entry(1, 7))].into();
    assign_roots(&mut later, &next, &roots);
    assert_eq!(root(&later, 102), Some(100));
    // A new orphan was never seen under a root.
    assert_eq!(root(&later, 103), None);
    // 101's helper 102 was seen under the harness; 101 becomes an extra
    // pid (a server added after the first scan): it takes 102 over.
    let more: BTreeSet<i32> = [100, 101, 200].into();
    let mut again: HashMap<i32, ScanEntry> = [
        (100, entry(50, 1)),
        (101, entry(100, 4)),
        (102, entry(101, 5)),
    ]
    .into();
    assign_roots(&mut again, &next, &more);
    assert_eq!(root(&again, 102), Some(101));
}

#[test]
fn a_tree_that_ended_is_not_charged_again_to_its_surviving_ancestor() {
    // Harness 100 started hog 200, whose worker 201 used 500 ticks; both
    // ended since the last scan and the harness reaped 200, which had
    // reaped 201: the harness's cutime grew by 200's and 201's CPU,
    // 510 ticks last seen plus 6 used after the last scan.
    let roots: BTreeSet<i32> = [100, 200].into();
    let mk = |ppid, start, ticks, child_ticks| ScanEntry {
        ticks,
        child_ticks,
        ..entry(ppid, start)
    };
    let mut prev: HashMap<i32, ScanEntry> = [
        (100, mk(1, 1, 50, 0)),
        (200, mk(100, 2, 10, 0)),
        (201, mk(200, 3, 500, 0)),
    ]
    .into();
    assign_roots(&mut prev, &HashMap::new(), &roots);
    let mut next: HashMap<i32, ScanEntry> = [(100, mk(1, 1, 60, 516))].into();
    assign_roots(&mut next, &prev, &roots);
    let (foreign, ours) = charge_scan(&prev, &next, &roots, 0);
    assert!(foreign.is_empty(), "{foreign:?}");
    // Only the 6 ticks used since the last scan; the harness's own CPU is
    // measured every sample, not here.
    let total: u64 = ours.iter().map(|c| c.ticks).sum();
    assert_eq!(total, 6, "{ours:?}");
}

#[test]
fn descendant_cpu_moves_from_foreign_to_its_root() {
    let mut v = vec![sample(100, 100, 0), sample(200, 100, 0)];
    for x in &mut v {
        x.foreign_cpu_pct = 80.0;
        x.extra = vec![ProcSample {
            pid: 200,
            ..Default::default()
        }];
    }
    // 10 ticks (0.1 s at 100 Hz) of the harness's helper and 4 of the
    // hog's worker over the scan 0..200 ms.
    let scans = vec![ScanRecord {
        from: 0,
        to: 200_000_000,
        charges: Vec::new(),
        ours: vec![
            OurCharge {
                root: 100,
                name: "lt-proc".into(),
                pid: 101,
                ticks: 10,
            },
            OurCharge {
                root: 200,
                name: "stress".into(),
                pid: 201,
                ticks: 4,
            },
        ],
    }];
    credit_descendants(&mut v, &scans, 100.0, 100);
    for x in &v {
        // 0.05 s of CPU in each 0.1 s sample: 50 %; the hog's 20 %.
        assert!((x.harness.children_cpu_pct - 50.0).abs() < 1e-9);
        assert!((x.extra[0].children_cpu_pct - 20.0).abs() < 1e-9);
        assert!((x.foreign_cpu_pct - 10.0).abs() < 1e-9);
    }
}

#[test]
fn foreign_charges_are_shared_by_overlap() {
    let scans = vec![ScanRecord {
        from: 0,
        to: 1_000_000_000,
        charges: vec![("hog".into(), 7, 100)],
        ours: Vec::new(),
    }];
    let secs: BTreeMap<Phase, f64> = [
        (Phase::Warmup, 0.25),
        (Phase::Measured, 0.5),
        (Phase::After, 0.25),
    ]
    .into();
    let f = foreign_by_phase(&scans, Some((250_000_000, 750_000_000)), &secs, 100.0);
    // 50 ticks (0.5 s of CPU) over a 0.5 s phase: one full CPU.
    assert!((f[&Phase::Measured][0].cpu_pct - 100.0).abs() < 1e-9);
    assert_eq!(f[&Phase::Measured][0].pids, vec![7]);
}
