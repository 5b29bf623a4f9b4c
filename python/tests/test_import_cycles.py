"""scripts/import-cycles.py on Python packages: it finds a cycle (lazy imports included), and
taillab has none."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import script

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def checker():
    return script("scripts/import-cycles.py")


def _package(root: Path, files: dict[str, str]) -> Path:
    """``root/python/pkg/`` with ``files`` (path -> source) and an empty ``__init__.py``."""
    pkg = root / "python" / "pkg"
    for name, text in {"__init__.py": "", **files}.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    return pkg


def test_a_lazy_import_still_closes_a_cycle(checker, tmp_path, capsys):
    # b imports a only inside a function: the cycle is dodged at import time, not gone.
    pkg = _package(
        tmp_path,
        {
            "a.py": "from .b import helper\n",
            "b.py": "def helper():\n    from . import a\n    return a\n",
            "leaf.py": "import os\n",
        },
    )
    assert checker.python_cycles(pkg) == [["a", "b", "a"]]
    assert checker.main(tmp_path) == 1
    assert "python/pkg: import cycle a -> b -> a" in capsys.readouterr().out


@pytest.mark.parametrize(
    "c_imports_a",
    [
        "import pkg.a\n",
        "from pkg import a\n",
        "from pkg.a import x\n",
        "from .. import a\n",
        "from ..a import x\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..a import x\n",
    ],
)
def test_every_spelling_of_an_import_counts(checker, tmp_path, c_imports_a):
    # a -> sub.c (a subpackage's module), and sub.c back to a, spelled each way.
    pkg = _package(
        tmp_path,
        {"a.py": "from .sub import c\nx = 1\n", "sub/__init__.py": "", "sub/c.py": c_imports_a},
    )
    assert checker.python_cycles(pkg) == [["a", "sub.c", "a"]]


def test_a_name_from_the_package_is_a_dependency_on_its_init(checker, tmp_path):
    pkg = _package(tmp_path, {"a.py": "from . import VERSION\n"})
    (pkg / "__init__.py").write_text("from .a import *\nVERSION = 1\n")
    assert checker.python_cycles(pkg) == [["__init__", "a", "__init__"]]


def test_layers_pass(checker, tmp_path, capsys):
    _package(
        tmp_path,
        {
            "leaf.py": "import json\n",
            "mid.py": "from . import leaf\n",
            "top.py": "from .mid import x\n\ndef f():\n    from .leaf import y\n",
        },
    )
    assert checker.main(tmp_path) == 0
    assert "python/pkg" in capsys.readouterr().out


def test_taillab_has_no_import_cycle(checker):
    assert checker.python_cycles(REPO / "python" / "taillab") == []


def _crate(root: Path, files: dict[str, str]) -> Path:
    """``root/krate/`` with a Cargo.toml and ``src/`` holding ``files`` (path -> source)."""
    crate = root / "krate"
    (crate / "src").mkdir(parents=True, exist_ok=True)
    (crate / "Cargo.toml").write_text('[package]\nname = "krate"\n')
    for name, text in files.items():
        (crate / "src" / name).write_text(text)
    return crate


@pytest.mark.parametrize(
    "b_uses_a",
    [
        "use crate::a::x;\n",
        "use crate::{a, c};\n",
        "use crate::{c::y, a::{x, Z}};\n",
        "use crate::{\n    c,\n    a,\n};\n",
        "fn f() { crate::a::x(); }\n",
    ],
)
def test_a_rust_cycle_in_every_spelling_of_a_use(checker, tmp_path, capsys, b_uses_a):
    # a -> b (plainly), b -> a in the spelling under test; c is a leaf.
    crate = _crate(
        tmp_path,
        {
            "lib.rs": "mod a;\nmod b;\nmod c;\n",
            "a.rs": "use crate::b::y;\npub fn x() {}\n",
            "b.rs": b_uses_a + "pub fn y() {}\n",
            "c.rs": "pub fn y() {}\n",
        },
    )
    assert checker.cycles(crate) == [["a", "b", "a"]], b_uses_a
    assert checker.main(tmp_path) == 1
    assert "krate: import cycle a -> b -> a" in capsys.readouterr().out


def test_a_group_of_types_is_no_module(checker, tmp_path):
    # `use crate::{Thing, a::x}` names the module a, and a type that is no module.
    crate = _crate(
        tmp_path,
        {
            "lib.rs": "mod a;\nmod b;\npub struct Thing;\n",
            "a.rs": "pub fn x() {}\n",
            "b.rs": "use crate::{Thing, a::x};\n",
        },
    )
    assert checker.cycles(crate) == []
    src = crate / "src"
    assert checker.deps(src, src / "b.rs", {"a", "b", ""}) == {"a"}
