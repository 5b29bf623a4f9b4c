use super::experiment::Plan;
use super::flags::ConfigFlags;
use super::*;
use clap::{Args, FromArgMatches};

/// A value of `f` other than its default, in its text form.
fn sample(f: &Field) -> String {
    if let Some(p) = f.possible {
        let d = (f.default)();
        return p
            .iter()
            .find(|n| **n != d)
            .expect("two choices")
            .to_string();
    }
    let form = f.form;
    let v = if f.switch {
        if (f.default)() == "true" {
            "false"
        } else {
            "true"
        }
    } else if form.contains("k=K") {
        "k=3"
    } else if form.contains("after=") {
        "after=2ms"
    } else if form.contains("CLASS:N") {
        "cpu:1@cpus=0"
    } else if form.contains("C-state") {
        "10us"
    } else if form.contains("real-time period") {
        "950000"
    } else if form.contains("NUMA") {
        "0"
    } else if form.contains("duration") {
        "3ms"
    } else if form.contains("size") {
        "2MiB"
    } else if form.contains("CPU list") {
        "0"
    } else if form.contains("distribution") {
        "exp:5us"
    } else if form.contains("arrival") {
        "fixed"
    } else if form.contains("comma-separated") {
        "sojourn.p99"
    } else if form.contains("number like 2500") {
        "0.25"
    } else if form.contains("whole number") {
        "7"
    } else {
        "some:text"
    };
    v.to_string()
}

fn roundtrip(c: &RunConfig) -> RunConfig {
    let doc: toml::Table = c.to_toml().parse().expect("config.toml is TOML");
    let mut back = RunConfig::default();
    back.apply_toml(&doc, "config.toml", &[])
        .expect("config.toml reads back");
    back
}

fn parse_flags<const V: u8>(argv: &[String]) -> Vec<(String, Vec<String>)> {
    let cmd = ConfigFlags::<V>::augment_args(clap::Command::new("t").no_binary_name(true));
    let m = cmd
        .try_get_matches_from(argv)
        .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
    ConfigFlags::<V>::from_arg_matches(&m).unwrap().pairs
}

#[test]
fn every_field_from_toml_flag_grid_and_round_trip() {
    let all = fields();
    assert!(all.len() > 40, "{} fields", all.len());
    for f in &all {
        assert!(!f.help().is_empty(), "{} has no help", f.key());
        let v = sample(f);
        let want = {
            let mut c = RunConfig::default();
            c.set_field(f, &[&v])
                .unwrap_or_else(|e| panic!("{}: {e}", f.key()));
            let got = c.get_field(f);
            assert_ne!(
                got,
                (f.default)(),
                "{}: sample {v} equals the default",
                f.key()
            );
            c
        };
        // TOML.
        let lit = if f.switch || v.parse::<f64>().is_ok() {
            v.clone()
        } else {
            format!("{v:?}")
        };
        let doc: toml::Table = format!("[{}]\n{} = {lit}\n", f.section, f.name)
            .parse()
            .unwrap();
        let mut c = RunConfig::default();
        c.apply_toml(&doc, "t", &[])
            .unwrap_or_else(|e| panic!("{}: {e}", f.key()));
        assert_eq!(c, want, "{} from TOML", f.key());
        // Flags, in every command that takes them.
        let argv: Vec<String> = if f.switch {
            vec![format!("--{}", f.flag())]
        } else {
            vec![format!("--{}", f.flag()), v.clone()]
        };
        for (bit, pairs) in [
            (
                view::RUN,
                parse_flags::<{ view::RUN }> as fn(&[String]) -> _,
            ),
            (view::SERVE, parse_flags::<{ view::SERVE }>),
            (view::LOAD, parse_flags::<{ view::LOAD }>),
        ] {
            if f.in_view(bit) {
                let mut c = RunConfig::default();
                c.apply(&pairs(&argv), "flags").unwrap();
                assert_eq!(c, want, "{} from flag in view {bit}", f.key());
            }
        }
        // A grid axis (two values: the default and the sample); the
        // load axis makes points rather than groups.
        if f.key() == "load.qps" {
            let plan = Plan::parse(None, &[], &[], &[format!("load.qps=3|{v}")]).unwrap();
            let pts = plan.points(&plan.groups().unwrap()[0], 1.0).unwrap();
            assert_eq!(pts[1].config, want, "load.qps from --grid");
            assert_eq!(roundtrip(&want), want, "load.qps through config.toml");
            continue;
        }
        let grid = format!("{}={}|{}", f.key(), (f.default)(), v);
        let plan =
            Plan::parse(None, &[], &[], &[grid]).unwrap_or_else(|e| panic!("{}: {e}", f.key()));
        let groups = plan.groups().unwrap();
        assert_eq!(groups.len(), 2, "{}", f.key());
        assert_eq!(groups[1].config, want, "{} from --grid", f.key());
        assert_eq!(
            groups[0].config,
            RunConfig::default(),
            "{} default from --grid",
            f.key()
        );
        // config.toml.
        assert_eq!(roundtrip(&want), want, "{} through config.toml", f.key());
    }
}

#[test]
fn flags_are_unique_per_command() {
    for bit in [view::RUN, view::SWEEP, view::SERVE, view::LOAD] {
        let mut seen = std::collections::BTreeSet::new();
        for f in fields().iter().filter(|f| f.in_view(bit)) {
            for n in std::iter::once(f.flag()).chain(f.opts.aliases.iter().map(|a| a.to_string())) {
                assert!(seen.insert(n.clone()), "flag --{n} twice in view {bit}");
            }
        }
    }
}

#[test]
fn bad_values_name_key_and_form() {
    let mut c = RunConfig::default();
    let e = c.set("harness.threads", &["two"]).unwrap_err().to_string();
    assert!(
        e.starts_with("harness.threads:") && e.contains("whole number"),
        "{e}"
    );
    let e = c.set("load.duration", &["soon"]).unwrap_err().to_string();
    assert!(
        e.contains("load.duration") && e.contains("duration like 30s"),
        "{e}"
    );
    let e = c.set("harness.wait", &["nap"]).unwrap_err().to_string();
    assert!(e.contains("spin, block or hybrid"), "{e}");
    // The error keeps its parts: the parser's own form stays, and a setting's
    // form is added, once, only where the parser named none.
    let parts = |key: &str, v: &str| match c.clone().set(key, &[v]) {
        Err(ConfigError::BadValue { key, error }) => (key, error),
        other => panic!("{key}={v}: {other:?}"),
    };
    let (key, e) = parts("harness.threads", "two");
    assert_eq!((key.as_str(), e.given.as_str()), ("harness.threads", "two"));
    assert_eq!(e.expected.as_deref(), Some(<usize as ConfigValue>::FORM));
    let (_, e) = parts("harness.wait", "nap");
    assert_eq!(e.expected.as_deref(), Some("spin, block or hybrid"));
    let (_, e) = parts("harness.dispatch", "nope");
    assert!(e.problem.contains("unknown dispatch `nope`"), "{e:?}");
    assert_eq!(e.expected.as_deref(), Some(<Dispatch as ConfigValue>::FORM));
    let (_, e) = parts("load.duration", "20x");
    assert_eq!(e.to_string().matches("(expected").count(), 1, "{e}");
    let e = c.set("harness.thread", &["2"]).unwrap_err().to_string();
    assert!(
        e.contains("did you mean `harness.threads` (section [harness])"),
        "{e}"
    );
    // Later layers clear the other half of a pair; one layer may not give both.
    c.set("requests", &["10"]).unwrap();
    c.set("duration", &["1s"]).unwrap();
    assert_eq!(
        (c.load.requests, c.load.duration),
        (None, Some(Dur(1_000_000_000)))
    );
    let both = vec![
        ("load.requests".into(), vec!["1".into()]),
        ("load.duration".into(), vec!["1s".into()]),
    ];
    assert!(c
        .apply(&both, "flags")
        .unwrap_err()
        .to_string()
        .contains("not both"));
    // Several values where one is taken: a variant of its own (a caller hints at sweeps).
    for (k, v) in [
        ("harness.threads", &["1", "2"][..]),
        ("app.service", &["a", "b"]),
        ("app.name", &[]),
    ] {
        let e = c.set(k, v).unwrap_err();
        assert!(
            matches!(&e, ConfigError::OneValue { got, .. } if *got == v.len()),
            "{k}: {e}"
        );
    }
    // A list or repeated key takes several.
    c.set("harness.cpus", &["0", "1"]).unwrap();
    c.set("net.client_launcher", &["a {cmd}", "b {cmd}"])
        .unwrap();
}

/// Under `rt_priority` a hybrid wait blocks (a spinning SCHED_FIFO worker is throttled),
/// the run says so, and an explicit spin is kept.
#[test]
fn rt_workers_block_instead_of_spinning() {
    let mut c = RunConfig::default();
    c.set("app.name", &["synth"]).unwrap();
    c.set("load.qps", &["1000"]).unwrap();
    c.set("load.requests", &["100"]).unwrap();
    let (spec, note) = c.run_spec().unwrap();
    assert_eq!((spec.wait, note), (WaitMode::Hybrid, None));
    c.set("harness.rt_priority", &["50"]).unwrap();
    let (spec, note) = c.run_spec().unwrap();
    assert_eq!(spec.wait, WaitMode::Block);
    assert!(note.unwrap().contains("RT throttling"));
    c.set("harness.wait", &["spin"]).unwrap();
    let (spec, note) = c.run_spec().unwrap();
    assert_eq!((spec.wait, note), (WaitMode::Spin, None));
}

/// `harness.nice` reaches the spec, round-trips through config.toml, and is refused out
/// of -20..=19 or beside `rt_priority` (one scheduling class per worker).
#[test]
fn a_worker_nice_value_is_checked() {
    let mut c = RunConfig::default();
    c.set("app.name", &["synth"]).unwrap();
    c.set("load.qps", &["1000"]).unwrap();
    c.set("load.requests", &["100"]).unwrap();
    c.set("harness.nice", &["-20"]).unwrap();
    assert_eq!(c.spec().unwrap().nice, Some(-20));
    assert_eq!(roundtrip(&c), c);
    c.set("harness.nice", &["20"]).unwrap();
    assert!(c.spec().unwrap_err().to_string().contains("-20..=19"));
    c.set("harness.nice", &["-5"]).unwrap();
    c.set("harness.rt_priority", &["50"]).unwrap();
    let e = c.spec().unwrap_err().to_string();
    assert!(
        e.contains("harness.nice -5") && e.contains("rt_priority 50"),
        "{e}"
    );
}

#[test]
fn app_settings_and_flags_for_children() {
    let mut c = RunConfig::default();
    c.set("app.name", &["kv"]).unwrap();
    c.set("app.workload", &["c"]).unwrap();
    c.set("harness.threads", &["2"]).unwrap();
    c.set("net.client_cpus", &["0"]).unwrap();
    assert_eq!(roundtrip(&c), c);
    let keys = [KeySpec {
        name: "workload",
        default: "a",
        help: "",
    }];
    c.check_app_keys("kv", &keys).unwrap();
    c.set("app.worklaod", &["c"]).unwrap();
    let e = c.check_app_keys("kv", &keys).unwrap_err().to_string();
    assert!(e.contains("did you mean `workload`"), "{e}");
    let mut c = RunConfig::default();
    c.set("harness.threads", &["2"]).unwrap();
    c.set("net.client_cpus", &["0"]).unwrap();
    c.set("harness.wait", &["spin"]).unwrap();
    let serve = c.flags_for(view::SERVE, &RunConfig::default());
    assert_eq!(serve, ["--threads", "2", "--wait", "spin"]);
    let load = c.flags_for(view::LOAD, &RunConfig::default());
    assert_eq!(
        load,
        ["--threads", "2", "--wait", "spin", "--client-cpus", "0"]
    );
}
