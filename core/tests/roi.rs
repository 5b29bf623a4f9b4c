//! Simulator markers in an integrated run: `--roi zsim` runs on real
//! hardware with one region begin, one end and one heartbeat per measured
//! request, both shapers; the binary holds zsim's exact instruction
//! sequences; `--roi gem5` is refused on a CPU that is not gem5's.

mod common;

use common::*;
use std::sync::Arc;
use taillab_core::harness::{Bound, ShaperMode};
use taillab_core::roi::{self, RoiMode};
use taillab_core::{run_integrated, RunSpec};

fn spec(roi: RoiMode, shaper: ShaperMode) -> RunSpec {
    RunSpec {
        qps: 5_000.0,
        threads: 2,
        shaper,
        warmup: Bound::Requests(300),
        measure: Bound::Requests(700),
        roi,
        ..RunSpec::default()
    }
}

#[test]
fn zsim_markers_bracket_the_measured_phase_on_real_hardware() {
    let _s = serial();
    for shaper in [ShaperMode::Inline, ShaperMode::Thread] {
        let before = roi::emitted();
        let r = run_integrated(
            &spec(RoiMode::Zsim, shaper),
            Arc::new(Spin),
            client("fixed:20us", 1),
            &mut |_| {},
        )
        .expect("a zsim-marked run completes on real hardware");
        let n = roi::emitted().since(before);
        assert_eq!(r.totals.measured, 700);
        // One begin, one end, one heartbeat per measured request (none for
        // the 300 warmup ones).
        let want = roi::RoiCounts {
            begin: 1,
            end: 1,
            heartbeat: 700,
        };
        assert_eq!(n, want, "{shaper:?}");
    }
    // Off: nothing issued.
    let before = roi::emitted();
    run_integrated(
        &spec(RoiMode::None, ShaperMode::Inline),
        Arc::new(Spin),
        client("fixed:20us", 1),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(roi::emitted(), before);
}

#[test]
fn gem5_markers_are_refused_outside_gem5() {
    if roi::in_gem5() {
        return; // inside gem5 they are exactly what is wanted
    }
    let e = run_integrated(
        &spec(RoiMode::Gem5, ShaperMode::Inline),
        Arc::new(Spin),
        client("fixed:20us", 1),
        &mut |_| {},
    )
    .err()
    .expect("refused before anything runs");
    assert!(e.to_string().contains("SIGILL"), "{e}");
}

/// The disassembly of one function of this test binary (which links
/// taillab-core), from `objdump -d` (`raw`: with the instruction bytes).
fn disassembly_of(symbol_part: &str, raw: bool) -> Option<String> {
    let exe = std::env::current_exe().ok()?;
    let out = std::process::Command::new("objdump")
        .args(["-d", "-M", "att"])
        .args((!raw).then_some("--no-show-raw-insn"))
        .arg(&exe)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let start = text
        .lines()
        .position(|l| l.ends_with(">:") && l.contains(symbol_part))?;
    Some(
        text.lines()
            .skip(start)
            .take_while(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("\n"),
    )
}

#[test]
fn binary_holds_zsims_magic_instructions_with_their_codes() {
    // Keep the functions in the binary.
    roi::zsim_roi_begin();
    roi::zsim_roi_end();
    roi::zsim_heartbeat();
    if std::process::Command::new("objdump")
        .arg("--version")
        .output()
        .is_err()
    {
        panic!("objdump is needed for this test: apt-get install binutils");
    }
    for (f, code) in [
        ("zsim_roi_begin", 1025),
        ("zsim_roi_end", 1026),
        ("zsim_heartbeat", 1028),
    ] {
        let d = disassembly_of(f, false).unwrap_or_else(|| panic!("no function {f} in the binary"));
        let mov = format!("mov    $0x{code:x},%ecx");
        let lines: Vec<&str> = d.lines().collect();
        let x = lines
            .iter()
            .position(|l| l.contains("xchg   %rcx,%rcx"))
            .unwrap_or_else(|| panic!("no xchg %rcx,%rcx in {f}:\n{d}"));
        assert!(
            lines[..x].iter().any(|l| l.contains(&mov)),
            "{f} does not load {code} into rcx before the xchg:\n{d}"
        );
    }
}

#[test]
fn binary_holds_gem5s_m5ops_with_their_function_codes() {
    // 0F 04 then the 16-bit function code, little-endian (objdump cannot
    // decode it: no real CPU has the instruction).
    for (f, code) in [
        ("gem5_work_begin", "5a 00"),
        ("gem5_work_end", "5b 00"),
        ("gem5_reset_stats", "40 00"),
        ("gem5_dump_stats", "41 00"),
    ] {
        let d = disassembly_of(f, true).unwrap_or_else(|| panic!("no function {f} in the binary"));
        let bytes: String = d
            .lines()
            .skip(1)
            .filter_map(|l| l.split('\t').nth(1))
            .map(str::trim)
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            bytes.contains(&format!("0f 04 {code}")),
            "{f}: {bytes}\n{d}"
        );
    }
}
