//! Runs the real Apertium stages (Debian apertium-eng-spa, see apt.txt).

use std::time::{Duration, Instant};

use taillab_core::app::{DataCtx, Params, Worker};
use taillab_translate::pipeline::{parse_mode_file, Pipeline, PipelineError, Stage};
use taillab_translate::{app, DEFAULT_MODE};

/// The tests that start pipelines, one at a time: each starts Apertium's eleven stage
/// processes, and those of two tests at once on a 2-CPU host stretch the times that the
/// restart and timeout tests bound.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn translate_one(w: &mut dyn Worker, s: &str) -> String {
    let mut out = Vec::new();
    w.handle(s.as_bytes(), &mut out)
        .unwrap_or_else(|e| panic!("translating {s:?}: {e}"));
    String::from_utf8(out).unwrap()
}

#[test]
fn known_sentences_translate_to_known_spanish() {
    let _s = serial();
    let server = app()
        .server(&DataCtx::from_env(), &Params::new(), 1)
        .unwrap();
    let mut w = server.worker(0).unwrap();
    // Outputs of `echo SENTENCE | apertium eng-spa` (apertium-eng-spa 0.8.1);
    // the resident pipeline must give the same, final stop included.
    let cases = [
        ("I saw the cat.", "Vi el gato."),
        // Rule-based, word for word: "station" is taken as a TV channel
        // (`#` marks a generation gap) and "dog" as a noun modifier.
        ("Where is the station?", "Dónde es la #canal?"),
        (
            "The dog sleeps in the garden.",
            "Los sueños de perro en el jardín.",
        ),
        (
            "I can breathe better when the air is clean.",
            "Puedo respirar mejor cuándo el aire es limpio.",
        ),
        (
            "She bought [two] books for $5.",
            "Compró [dos] libros para $5.",
        ),
    ];
    for (en, es) in cases {
        assert_eq!(translate_one(w.as_mut(), en), es, "for {en:?}");
    }
    // The pipeline keeps answering in order, one answer per sentence.
    for _ in 0..3 {
        for (en, es) in cases {
            assert_eq!(translate_one(w.as_mut(), en), es);
        }
    }
}

#[test]
fn a_killed_stage_fails_the_request_and_the_pipeline_restarts() {
    let _s = serial();
    let server = app()
        .server(&DataCtx::from_env(), &Params::new(), 1)
        .unwrap();
    let mut w = server.worker(0).unwrap();
    assert_eq!(translate_one(w.as_mut(), "I saw the cat."), "Vi el gato.");
    // Reach the concrete worker through a fresh pipeline instead: the trait
    // object hides the pids, so kill a stage of a pipeline we own.
    let stages = parse_mode_file(std::path::Path::new(DEFAULT_MODE)).unwrap();
    let mut p = Pipeline::spawn(&stages, Duration::from_secs(5)).unwrap();
    assert_eq!(p.translate("I saw the cat.").unwrap(), "Vi el gato.");
    let pids = p.pids();
    let middle = pids[pids.len() / 2];
    // SAFETY: plain kill(2) on a child we spawned.
    assert_eq!(unsafe { libc::kill(middle as i32, libc::SIGKILL) }, 0);
    let t0 = Instant::now();
    let e = p.translate("I saw the cat.").unwrap_err();
    assert!(
        t0.elapsed() < Duration::from_secs(3),
        "took {:?}",
        t0.elapsed()
    );
    assert!(
        matches!(e, PipelineError::Eof { .. } | PipelineError::Write { .. }),
        "{e}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("signal: 9") && msg.contains("restarted"),
        "{msg}"
    );
}

#[test]
fn the_worker_restarts_its_pipeline_after_a_stage_dies() {
    let _s = serial();
    let mut w = taillab_translate::TranslateServer::from_params(&Params::new())
        .unwrap()
        .new_worker()
        .unwrap();
    assert_eq!(translate_one(&mut w, "I saw the cat."), "Vi el gato.");
    let pids = w.stage_pids();
    assert_eq!(pids.len(), 11, "eng-spa.mode has eleven stages");
    // SAFETY: plain kill(2) on a child we spawned.
    assert_eq!(unsafe { libc::kill(pids[3] as i32, libc::SIGKILL) }, 0);
    let t0 = Instant::now();
    let mut out = Vec::new();
    let e = w
        .handle(b"I saw the cat.", &mut out)
        .unwrap_err()
        .to_string();
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "took {:?}",
        t0.elapsed()
    );
    assert!(e.contains("apertium") && e.contains("stage 4"), "{e}");
    let new_pids = w.stage_pids();
    assert_eq!(new_pids.len(), 11);
    assert!(
        new_pids.iter().all(|p| !pids.contains(p)),
        "a fresh pipeline was started"
    );
    assert_eq!(translate_one(&mut w, "I saw the cat."), "Vi el gato.");
}

#[test]
fn a_stage_that_hangs_times_out() {
    let _s = serial();
    // `sleep` never writes: the read must give up at the timeout, not hang.
    let stages = [Stage {
        program: "sleep".into(),
        args: vec!["30".into()],
    }];
    let mut p = Pipeline::spawn(&stages, Duration::from_millis(300)).unwrap();
    let t0 = Instant::now();
    let e = p.translate("Hello.").unwrap_err();
    assert!(
        matches!(
            e,
            PipelineError::Timeout {
                timeout_ms: 300,
                ..
            }
        ),
        "{e}"
    );
    assert!(t0.elapsed() < Duration::from_secs(3));
}

#[test]
fn bad_inputs_give_clear_errors() {
    let a = app();
    let bad = Params::parse(["mode=/nonexistent/x.mode"]).unwrap();
    let e = a
        .server(&DataCtx::from_env(), &bad, 1)
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("/nonexistent/x.mode") && e.contains("apt.txt"),
        "{e}"
    );
    let bad = Params::parse(["timeout_ms=0"]).unwrap();
    assert!(a.server(&DataCtx::from_env(), &bad, 1).is_err());
    let bad = Params::parse(["corpus=subtitles"]).unwrap();
    let e = a
        .client(&DataCtx::from_env(), &bad, 1)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("wordnet"), "{e}");
    let stages = [Stage {
        program: "/nonexistent/lt-proc".into(),
        args: vec![],
    }];
    let e = Pipeline::spawn(&stages, Duration::from_secs(1))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("lt-proc") && e.contains("apt.txt"), "{e}");

    let server = a.server(&DataCtx::from_env(), &Params::new(), 1).unwrap();
    let mut w = server.worker(0).unwrap();
    let mut out = Vec::new();
    assert!(w
        .handle(b"a\0b", &mut out)
        .unwrap_err()
        .to_string()
        .contains("NUL"));
    assert!(w
        .handle(&[0xff, 0xfe], &mut out)
        .unwrap_err()
        .to_string()
        .contains("UTF-8"));
    // The bad requests did not disturb the pipeline.
    assert_eq!(translate_one(w.as_mut(), "I saw the cat."), "Vi el gato.");
}

#[test]
fn prepare_extracts_both_pools_and_the_client_is_seeded() {
    let root = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("translate-data");
    let data = DataCtx { root };
    let a = app();
    a.prepare(&data, &Params::new()).unwrap();
    let s = taillab_translate::load_sentences(&data.app_dir("translate")).unwrap();
    let wn = s.iter().filter(|(src, _)| src == "wordnet").count();
    let gc = s.iter().filter(|(src, _)| src == "gcide").count();
    assert!(wn > 10_000 && gc > 10_000, "wordnet {wn}, gcide {gc}");
    let draw = |seed, corpus: &str| {
        let p = Params::parse([format!("corpus={corpus}").as_str()]).unwrap();
        let mut c = a.client(&data, &p, seed).unwrap();
        (0..20)
            .map(|_| {
                let mut v = Vec::new();
                c.next_request(&mut v);
                String::from_utf8(v).unwrap()
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(draw(7, "mixed"), draw(7, "mixed"));
    assert_ne!(draw(7, "mixed"), draw(8, "mixed"));
    let gcide: std::collections::HashSet<&str> = s
        .iter()
        .filter(|(src, _)| src == "gcide")
        .map(|(_, t)| t.as_str())
        .collect();
    assert!(draw(3, "gcide").iter().all(|t| gcide.contains(t.as_str())));
    assert!(draw(3, "wordnet")
        .iter()
        .all(|t| !gcide.contains(t.as_str())));
}
