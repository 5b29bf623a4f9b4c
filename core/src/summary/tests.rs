use super::*;

/// The repository's root (tests/data, docs/schema).
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A copy of `tests/data/run-v1/summary.json` (a real `taillab.run/1` file)
/// with `edit` applied, written into a temporary folder.
fn edited_v1(tag: &str, edit: impl FnOnce(&mut Value)) -> PathBuf {
    let src = root().join("tests/data/run-v1/summary.json");
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(src).unwrap()).unwrap();
    edit(&mut v);
    let dir = std::env::temp_dir().join(format!("taillab-summary-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("summary.json");
    std::fs::write(&p, serde_json::to_string(&v).unwrap()).unwrap();
    p
}

#[test]
fn the_checked_in_schema_is_the_one_the_types_generate() {
    let want = serde_json::to_string_pretty(&run_schema()).unwrap() + "\n";
    // The Python package carries its own copy: it is installed without docs/.
    for rel in ["docs/schema/run-2.json", "python/taillab/schema/run-2.json"] {
        let p = root().join(rel);
        if std::env::var_os("TAILLAB_BLESS").is_some() {
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, &want).unwrap();
        }
        let have = std::fs::read_to_string(&p).unwrap_or_default();
        assert!(
            have == want,
            "{rel} is not the schema the types in core/src/summary.rs and core/src/sections/ generate; \
             regenerate it with `TAILLAB_BLESS=1 cargo test --release -p taillab-core checked_in_schema` \
             (or `taillab config schema run > {rel}`) and commit it with the change of the types"
        );
    }
}

#[test]
fn a_run_1_file_still_reads() {
    let p = root().join("tests/data/run-v1/summary.json");
    let s = Summary::read(&p).unwrap();
    assert_eq!(s.schema, "taillab.run/1");
    assert!(s.latency_ns["sojourn"].count > 0);
    assert!(s.environment.is_none() && s.transport.is_none());
}

#[test]
fn interarrival_judges_the_schedule_and_the_wire_within_the_send_lag() {
    use crate::arrival::ArrivalSpec;
    use crate::collector::Stamps;
    use rand::{Rng, SeedableRng};
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3);
    let mean = 50_000.0; // 20 000 requests/s
    let mut t = 1e9;
    let intended: Vec<u64> = (0..20_000)
        .map(|_| {
            t += -mean * (1.0 - rng.gen::<f64>()).ln();
            t as u64
        })
        .collect();
    // One client thread: a write costs 8 µs, so a request due sooner after the last
    // write waits for it and leaves with the next one (the wire's gaps alone fail a
    // plain fit to the exponential; they are within the send lag of the schedule).
    let mut free = 0u64;
    let wire: Vec<Stamps> = intended
        .iter()
        .map(|&i| {
            let sent = i.max(free);
            free = sent + 8_000;
            Stamps {
                intended: i,
                sent,
                ..Stamps::default()
            }
        })
        .collect();
    let lag = |st: &[Stamps]| {
        let mut l: Vec<u64> = st.iter().map(|s| s.sent - s.intended).collect();
        l.sort_unstable();
        l[l.len() * 99 / 100]
    };
    let c = interarrival_of(&wire, &ArrivalSpec::Poisson, 20_000.0, lag(&wire));
    assert!(c.ok, "{}", c.verdict);
    assert!(
        c.details["send_gaps_d"].as_f64().unwrap() > 0.02,
        "{:?}",
        c.details
    );
    // A schedule that is not Poisson fails on its own gaps, however well it is sent.
    let fixed: Vec<Stamps> = (0..20_000u64)
        .map(|k| Stamps {
            intended: k * 50_000,
            sent: k * 50_000,
            ..Stamps::default()
        })
        .collect();
    let c = interarrival_of(&fixed, &ArrivalSpec::Poisson, 20_000.0, 0);
    assert!(
        !c.ok && c.details["p_value"].as_f64().unwrap() < 1e-6,
        "{}",
        c.verdict
    );
    // A wire that sends every request in bursts of four (held up to 200 µs, beyond a
    // send lag p99 said to be 1 µs) fails against the schedule.
    let bursts: Vec<Stamps> = intended
        .chunks(4)
        .flat_map(|c| {
            let last = *c.last().unwrap();
            c.iter().map(move |&i| Stamps {
                intended: i,
                sent: last,
                ..Stamps::default()
            })
        })
        .collect();
    let c = interarrival_of(&bursts, &ArrivalSpec::Poisson, 20_000.0, 1_000);
    assert!(
        !c.ok && c.details["wire_p_value"].as_f64().unwrap() < 1e-6,
        "{}",
        c.verdict
    );
}

#[test]
fn the_table_leads_with_its_verdict_lines_up_and_says_what_was_not_measured() {
    let mut s = Summary::read(&root().join("tests/data/run-v1/summary.json")).unwrap();
    let t = human_table(&s);
    let first = t.lines().next().unwrap();
    let failed: Vec<&String> = s
        .checks
        .iter()
        .filter(|(_, c)| !c.ok)
        .map(|(n, _)| n)
        .collect();
    if failed.is_empty() {
        assert!(first.starts_with("verdict: every check passed"), "{first}");
    } else {
        assert!(
            first.contains("FAILED") && first.contains("--strict"),
            "{first}"
        );
    }
    // Every statistics row (the header's columns, the metrics, the ideal and its excess)
    // is as wide as the header: the columns line up.
    let header = t
        .lines()
        .find(|l| l.trim_start().starts_with("mean"))
        .unwrap();
    let rows: Vec<&str> = t
        .lines()
        .filter(|l| {
            METRICS
                .iter()
                .chain(&["ideal", "excess"])
                .any(|m| l.starts_with(&format!("{m} ")))
        })
        .collect();
    assert!(rows.len() >= 4, "{t}");
    for r in &rows {
        assert_eq!(r.len(), header.len(), "{r:?} under {header:?}");
    }
    // An external server: only sojourn is seen, and the table says so rather than 0.
    s.checks.get_mut("rate").unwrap().ok = false;
    s.transport = Some(crate::sections::transport::TransportSection::default());
    s.drop_ideal_of_external_server();
    let t = human_table(&s);
    assert!(t.lines().next().unwrap().contains("FAILED (rate"), "{t}");
    for m in ["service", "queue", "ideal"] {
        let row = t.lines().find(|l| l.starts_with(&format!("{m} "))).unwrap();
        assert!(row.contains("n/a (external server"), "{row}");
    }
    assert!(t.contains("utilization n/a (external server)"), "{t}");
    assert!(s.ideal.is_none() && s.ideal_skipped.is_some());
}

#[test]
fn every_section_reads_back_as_written() {
    use crate::sections::{environment::*, planned::*, transport::*, RoiSection};
    let mut s = Summary::read(&root().join("tests/data/run-v1/summary.json")).unwrap();
    s.schema = RUN_SCHEMA.into();
    s.counters = Some(Default::default());
    s.environment = Some(EnvSummary {
        top_foreign: vec![ForeignProcess {
            name: "cron".into(),
            cpu_pct: 1.5,
            pids: vec![7],
            cmdline: None,
        }],
        ..Default::default()
    });
    s.environment_redo = Some(EnvironmentRedo {
        redone: 1,
        budget: 2,
        discarded: vec![DiscardedRun::default()],
    });
    s.incomplete = Some("server lost".into());
    s.interference = Some(Default::default());
    s.nodes = Some(vec![
        NodeReport {
            node: "n1".into(),
            roles: vec!["server".into()],
            outcome: NodeOutcome::Env(NodeEnv {
                ok: true,
                ..Default::default()
            }),
        },
        NodeReport {
            node: "n2".into(),
            roles: vec![],
            outcome: NodeOutcome::Error {
                error: "gone".into(),
            },
        },
    ]);
    s.profile = Some(ProfileOutcome::Skipped {
        reason: "no perf".into(),
    });
    s.roi = Some(RoiSection {
        mode: crate::roi::RoiMode::Zsim,
        issued: Default::default(),
    });
    s.server = Some(Default::default());
    s.stalls = None;
    let counted = StampCounts {
        user: 3,
        ..Default::default()
    };
    s.transport = Some(TransportSection {
        stamps: Some(StampSources {
            enqueued: StampSource::clock("not reported"),
            completed: StampSource::counted(&counted),
            ..Default::default()
        }),
        per_client: Some(vec![ClientShare::default()]),
        ..Default::default()
    });
    s.tuning = Some(Default::default());
    let dir = std::env::temp_dir().join(format!("taillab-sections-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("summary.json");
    write_json_atomic(&p, &s).unwrap();
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
    // The JSON shapes readers rely on.
    assert_eq!(
        v["transport"]["stamps"]["enqueued"],
        json!({"clock": "not reported"})
    );
    assert_eq!(v["transport"]["stamps"]["completed"]["user"], 3);
    assert_eq!(
        v["nodes"][1],
        json!({"node": "n2", "roles": [], "error": "gone"})
    );
    assert_eq!(
        v["profile"],
        json!({"status": "skipped", "reason": "no perf"})
    );
    assert_eq!(Summary::read(&p).unwrap(), s);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_key_of_the_wrong_shape_is_named() {
    for (path, tag) in [
        (
            &["latency_ns", "sojourn", "p99"][..],
            "latency_ns.sojourn.p99",
        ),
        (&["requests", "measured"][..], "requests.measured"),
    ] {
        let p = edited_v1(tag, |v| {
            let mut at = v;
            for k in path {
                at = &mut at[*k];
            }
            *at = json!("abc");
        });
        let e = Summary::read(&p).unwrap_err().to_string();
        assert!(
            e.contains(&p.display().to_string()) && e.contains(tag),
            "{e}"
        );
    }
    let p = edited_v1("env", |v| {
        v["environment"] = json!({"steal_pct": "abc"});
    });
    let e = Summary::read(&p).unwrap_err().to_string();
    assert!(e.contains("environment"), "{e}");
    let p = edited_v1("schema", |v| v["schema"] = json!("taillab.run/99"));
    let e = Summary::read(&p).unwrap_err().to_string();
    assert!(
        e.contains("taillab.run/99") && e.contains("taillab.run/2"),
        "{e}"
    );
}

#[test]
fn rfc3339_known_dates() {
    let t = |s: u64| std::time::UNIX_EPOCH + std::time::Duration::from_secs(s);
    assert_eq!(rfc3339(t(0)), "1970-01-01T00:00:00.000Z");
    assert_eq!(rfc3339(t(951_782_400)), "2000-02-29T00:00:00.000Z");
    assert_eq!(rfc3339(t(1_795_305_600)), "2026-11-22T00:00:00.000Z");
}

#[test]
fn client_check_fails_on_a_late_reader_only() {
    let st = |p50: u64, p99: u64| MetricStats {
        count: 100,
        p50,
        p99,
        max: p99,
        ..Default::default()
    };
    let soj = st(100_000, 300_000);
    // Small lag: within the absolute floor.
    assert!(client_check(&st(2_000, 40_000), &soj, 50_000, 0.5, None).ok);
    // Large next to the floor but small next to the latency measured.
    assert!(
        client_check(
            &st(2_000, 49_000),
            &st(1_000_000, 2_000_000),
            20_000,
            0.5,
            None
        )
        .ok
    );
    let bad = client_check(&st(900_000, 1_500_000), &soj, 50_000, 0.5, None);
    assert!(
        !bad.ok && bad.verdict.contains("--client-cpus"),
        "{}",
        bad.verdict
    );
    let fb = client_check(
        &MetricStats::default(),
        &soj,
        50_000,
        0.5,
        Some("no kernel stamps"),
    );
    assert!(fb.ok && fb.verdict.contains("not measured"));
}

#[test]
fn slope_of_a_line() {
    let xs = [1.0, 2.0, 3.0, 4.0];
    assert!((slope(&xs, &[3.0, 5.0, 7.0, 9.0]) - 2.0).abs() < 1e-12);
    assert_eq!(slope(&[1.0], &[1.0]), 0.0);
}
