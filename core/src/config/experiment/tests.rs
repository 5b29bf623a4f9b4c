use super::*;

fn pairs(v: &[(&str, &str)]) -> Vec<(String, Vec<String>)> {
    v.iter()
        .map(|(k, x)| (k.to_string(), vec![x.to_string()]))
        .collect()
}

fn base() -> Vec<(String, Vec<String>)> {
    pairs(&[("app.name", "synth"), ("load.requests", "100")])
}

#[test]
fn flags_make_axes_and_points() {
    let mut f = base();
    f.extend(pairs(&[
        ("net.topology", "integrated|loopback"),
        ("load.qps", "1000,2000"),
        ("harness.cpus", "0,1"),
    ]));
    let p = Plan::build(None, &f, &[], &["harness.rt_priority=0|10".into()]).unwrap();
    assert_eq!(p.count(), 8);
    assert_eq!(
        p.base.harness.cpus.0,
        vec![0, 1],
        "a list value is not an axis"
    );
    let groups = p.groups().unwrap();
    assert_eq!(groups.len(), 4);
    let pts = p.points(&groups[3], 1.0).unwrap();
    assert_eq!(pts[1].id, "loopback-t1-q2000-rt_priority-10");
    assert_eq!(pts[1].config.harness.rt_priority, 10);
    assert_eq!(pts[1].config.load.qps, Some(2000.0));
}

#[test]
fn ranges_fractions_and_errors() {
    let mut f = base();
    f.extend(pairs(&[("load.qps", "100:300:100")]));
    assert_eq!(Plan::build(None, &f, &[], &[]).unwrap().count(), 3);
    let s = pairs(&[("load", "0.2:0.8:0.2")]);
    let p = Plan::build(None, &base(), &s, &[]).unwrap();
    assert!(p.of_saturation());
    let g = &p.groups().unwrap()[0];
    assert_eq!(p.points(g, 1000.0).unwrap()[3].config.load.qps, Some(800.0));
    let e = Plan::build(None, &base(), &[], &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("say which loads"), "{e}");
    let e = Plan::build(None, &f, &[], &["harness.thread=1|2".into()])
        .unwrap_err()
        .to_string();
    assert!(e.contains("harness.threads"), "{e}");
    let e = Plan::build(None, &f, &[], &["harness.threads=1|two".into()])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("harness.threads") && e.contains("whole number"),
        "{e}"
    );
    let e = Plan::build(
        None,
        &f,
        &[],
        &["load.seed=1:20000:1".into(), "harness.threads=1|2".into()],
    );
    assert!(e.is_err());
    let mut big = f.clone();
    big.extend(pairs(&[("load.seed", "1:20000:1")]));
    let e = Plan::build(None, &big, &[], &[]).unwrap_err().to_string();
    assert!(e.contains("--yes"), "{e}");
}

#[test]
fn cases_set_several_keys_at_once() {
    let dir = std::env::temp_dir().join(format!("taillab-cases-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("c.toml");
    std::fs::write(
        &path,
        "[app]\nname = \"synth\"\n[load]\nqps = [100, 200]\nrequests = 10\n[harness]\ncpus = [0]\n\
         [[case]]\nname = \"none\"\n[[case]]\nname = \"hog\"\n\"interference.hogs\" = \"cpu:1@cpus=0\"\n\
         [[case]]\nname = \"hog rt\"\n\"interference.hogs\" = \"cpu:1@cpus=0\"\n\"harness.rt_priority\" = 50\n",
    )
    .unwrap();
    let p = Plan::parse(Some(&path), &[], &[], &[]).unwrap();
    assert_eq!(p.count(), 6);
    let g = p.groups().unwrap();
    assert_eq!(g[2].config.harness.rt_priority, 50);
    assert_eq!(g[2].config.interference.hogs.0.len(), 1);
    assert_eq!(g[0].config.interference.hogs.0.len(), 0);
    assert_eq!(
        p.points(&g[2], 1.0).unwrap()[0].id,
        "integrated-t1-q100-case-hog_rt"
    );
    std::fs::write(
        &path,
        "[app]\nname = \"synth\"\n[[case]]\nname = \"x\"\n\"harness.rt_prio\" = 5\n",
    )
    .unwrap();
    let e = Plan::parse(Some(&path), &[], &[], &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("harness.rt_priority"), "{e}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn file_axes_and_flag_overrides() {
    let dir = std::env::temp_dir().join(format!("taillab-plan-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("x.toml");
    std::fs::write(
        &path,
        "[app]\nname = \"synth\"\nservice = [\"exp:100us\", \"exp:200us\"]\n[load]\nqps = [500, 1500]\nduration = \"1s\"\n\
         [harness]\ncpus = [0]\n[grid]\n\"harness.threads\" = [1, 2]\n[sweep]\nprobe_seconds = 1\n",
    )
    .unwrap();
    let p = Plan::build(Some(&path), &[], &[], &[]).unwrap();
    assert_eq!(p.count(), 8);
    assert_eq!(p.sweep.probe, Dur(1_000_000_000));
    let p = Plan::build(
        Some(&path),
        &pairs(&[("harness.threads", "2"), ("load.qps", "700")]),
        &[],
        &[],
    )
    .unwrap();
    assert_eq!(p.count(), 2);
    assert_eq!(p.base.harness.threads, 2);
    std::fs::write(
        &path,
        "[app]\nname = \"synth\"\n[load]\nqps = 5\nrequests = 10\n[harness]\nthreds = 2\n",
    )
    .unwrap();
    let e = Plan::build(Some(&path), &[], &[], &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("harness.threds") && e.contains("did you mean `harness.threads`"),
        "{e}"
    );
    std::fs::write(&path, "app = \"synth\"\n").unwrap();
    let e = Plan::build(Some(&path), &[], &[], &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("section [app]"), "{e}");
    std::fs::write(
        &path,
        "[app]\nname = \"synth\"\n[load]\nqps = 5\nrequests = 10\nduration = \"1s\"\n",
    )
    .unwrap();
    let e = Plan::build(Some(&path), &[], &[], &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("not both"), "{e}");
    std::fs::remove_dir_all(dir).unwrap();
}
