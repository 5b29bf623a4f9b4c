//! Trains the models (scikit-learn, via $TAILLAB_PYTHON) and runs the real
//! tract model on every test image.

use std::sync::OnceLock;

use taillab_core::app::{DataCtx, Params};
use taillab_img_dnn::{app, ImgDnnServer, TestSet};

/// One prepared data folder for all tests of this file. `$TAILLAB_DATA`
/// when set (reuses `taillab data prepare`), else under the target dir.
fn data() -> &'static DataCtx {
    static D: OnceLock<DataCtx> = OnceLock::new();
    D.get_or_init(|| {
        let data = if std::env::var_os("TAILLAB_DATA").is_some() {
            DataCtx::from_env()
        } else {
            DataCtx {
                root: std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("data"),
            }
        };
        app()
            .prepare(&data, &Params::new())
            .unwrap_or_else(|e| panic!("{e}"));
        data
    })
}

/// Classifies the whole test split through `Worker::handle`; returns the
/// accuracy and what scikit-learn measured on the same split.
fn accuracy(dataset: &str) -> (f64, f64) {
    let dir = data().app_dir("img-dnn").join(dataset);
    let set = TestSet::load(&dir.join("test.bin")).unwrap();
    let params = Params::parse([format!("dataset={dataset}").as_str()]).unwrap();
    let server = app().server(data(), &params, 1).unwrap();
    let mut w = server.worker(0).unwrap();
    let (mut req, mut resp) = (Vec::new(), Vec::new());
    let mut right = 0;
    for i in 0..set.len() {
        req.clear();
        resp.clear();
        for p in set.image(i) {
            req.extend_from_slice(&p.to_le_bytes());
        }
        w.handle(&req, &mut resp).unwrap();
        assert_eq!(resp.len(), 1);
        right += usize::from(resp[0] == set.label(i));
    }
    let acc = right as f64 / set.len() as f64;
    let sk = server.report()["model"]["sklearn_test_accuracy"]
        .as_f64()
        .unwrap();
    println!(
        "{dataset}: tract accuracy {acc:.4} on {} test images (scikit-learn {sk:.4})",
        set.len()
    );
    (acc, sk)
}

#[test]
fn mnist_accuracy_above_95_percent() {
    let (acc, sk) = accuracy("mnist");
    assert!(acc > 0.95, "MNIST accuracy {acc}");
    // The exported graph computes what scikit-learn computed: float rounding
    // may flip a handful of near-ties, not more.
    assert!((acc - sk).abs() < 0.002, "tract {acc} vs scikit-learn {sk}");
}

#[test]
fn fashion_accuracy_reported() {
    let (acc, sk) = accuracy("fashion");
    // Fashion-MNIST is harder; a 1-hidden-layer MLP is published at 84-88 %.
    assert!(acc > 0.8, "Fashion-MNIST accuracy {acc}");
    assert!((acc - sk).abs() < 0.002, "tract {acc} vs scikit-learn {sk}");
}

#[test]
fn client_is_seeded_and_sends_test_images() {
    let a = app();
    let draw = |seed| {
        let mut c = a.client(data(), &Params::new(), seed).unwrap();
        (0..10)
            .map(|_| {
                let mut v = Vec::new();
                c.next_request(&mut v);
                v
            })
            .collect::<Vec<_>>()
    };
    let x = draw(5);
    assert_eq!(x, draw(5));
    assert_ne!(x, draw(6));
    assert!(x.iter().all(|r| r.len() == 784 * 4));
}

#[test]
fn bad_inputs_give_clear_errors() {
    let a = app();
    let bad = Params::parse(["dataset=cifar"]).unwrap();
    let e = a.client(data(), &bad, 1).err().unwrap().to_string();
    assert!(e.contains("mnist or fashion"), "{e}");
    let e = a
        .server(data(), &Params::parse(["hidden=3"]).unwrap(), 1)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("dataset"), "{e}");
    let empty = DataCtx {
        root: std::env::temp_dir().join("taillab-img-dnn-none"),
    };
    let e = a
        .server(&empty, &Params::new(), 1)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("taillab data prepare img-dnn"), "{e}");

    let server = ImgDnnServer::load(&data().app_dir("img-dnn").join("mnist")).unwrap();
    let mut w = server.new_worker().unwrap();
    let mut out = Vec::new();
    use taillab_core::app::Worker;
    let e = w.handle(&[0u8; 100], &mut out).unwrap_err().to_string();
    assert!(e.contains("3136 bytes"), "{e}");
}
