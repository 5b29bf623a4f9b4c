//! `taillab reproduce` end to end on the cheapest items (issue 17; every
//! item's page and verdict rule is tested on fixtures in
//! python/tests/test_reproduce.py): the experiments run, the page and a
//! computed verdict are written, the report of the Tales Fig. 5 experiment
//! puts its four cases side by side with their resources (issue 16).

use std::process::Command;

mod common;
use common::*;

fn reproduce(id: &str, out: &std::path::Path) -> serde_json::Value {
    let o = Command::new(bin())
        .args(["reproduce", id, "--quick", "-q", "--out"])
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.join(id).join("index.html").exists());
    json(&out.join(id).join("verdict.json"))
}

#[test]
fn tales_fig5_runs_its_four_cases_and_reports_them_with_resources() {
    let _s = serial();
    let out = tmp("repro-fig5");
    let v = reproduce("tales-fig5", &out);
    assert_eq!(v["id"], "tales-fig5");
    let status = v["status"].as_str().unwrap();
    assert!(
        ["confirmed", "partly", "not confirmed", "inconclusive"].contains(&status),
        "{v}"
    );
    assert!(!v["verdict"].as_str().unwrap().is_empty());
    let exp = out.join("tales-fig5/tales-fig5");
    let points = json(&exp.join("experiment.json"))["points"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(points, 4);
    let html = report_html(&exp);
    assert!(
        html.contains("setting_comparison"),
        "cases not side by side"
    );
    assert!(html.contains("resources"), "no resource table");
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn unknown_items_are_listed() {
    let o = Command::new(bin())
        .args(["reproduce", "tailbench-fig99"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("tailbench-fig3") && e.contains("tales-fig5"),
        "{e}"
    );
    let o = Command::new(bin())
        .args(["reproduce", "--list"])
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).lines().count() >= 13);
}
