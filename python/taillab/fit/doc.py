"""fit.json: every point of a results folder fitted, read and written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..figures import service_fit
from ..results import Results, load
from .common import SCHEMA, FitError, _clean, _plain, _safe
from .config import DEFAULT, FitConfig, using
from .point import fit_point
from .pooled import fit_pooled


def fit_results(
    path: str | Path | Results,
    point: str | None = None,
    pooled: bool = False,
    cfg: FitConfig = DEFAULT,
    **kw,
) -> dict[str, Any]:
    """Fit every point of a results folder (or only ``point``): the fit.json document.

    A point that cannot be fitted gets an entry ``{"point", "error"}`` instead of a fit;
    with ``point`` given, its error is raised. ``pooled`` adds the entry ``"all"``: one fit
    across the fewest-worker points, its optional terms chosen on held-out blocks
    (:func:`fit_pooled`; ``cfg`` its settings).
    """
    res = path if isinstance(path, Results) else load(path)
    with using(cfg):
        fits = _fits(res, point, pooled, cfg, kw)
    return _clean({"schema": SCHEMA, "results": str(res.root), "fits": fits})


def _fits(res: Results, point: str | None, pooled: bool, cfg: FitConfig, kw) -> list:
    """The entries of fit.json (see :func:`fit_results`)."""
    ids = [str(p) for p in res.points["point"] if p is not None]
    if point is not None:
        if point not in ids:
            raise FitError(f"no point {point!r} in {res.root}; its points are {ids}")
        ids = [point]
    fits = []
    for pid in ids:
        try:
            fits.append(fit_point(res, pid, **kw))
        except FitError as e:
            if point is not None:
                raise
            fits.append({"point": pid, "error": str(e)})
    if pooled:
        try:
            fits.append(fit_pooled(res, cfg=cfg, **kw))
        except FitError as e:
            fits.append({"point": "all", "error": str(e)})
    return fits


def read_fit(path: str | Path) -> dict[str, Any]:
    """Read a fit.json (a file or the folder holding it), checking its schema."""
    p = Path(path)
    p = p / "fit.json" if p.is_dir() else p
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise FitError(
            f"cannot read {p}: {e}; write it with `taillab fit RESULTS --out DIR`"
        ) from e
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise FitError(f"{p} is not a {SCHEMA} document; rewrite it with `taillab fit`")
    return doc


def write_fit(doc: dict[str, Any], out: str | Path) -> Path:
    """Write ``out/fit.json`` and ``out/fit-figures/<point>.png|svg``; returns fit.json's path."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for f in doc["fits"]:
        if "error" not in f:
            service_fit(f, out / "fit-figures" / _safe(f["point"]))
    path = out / "fit.json"
    path.write_text(json.dumps(doc, indent=1, allow_nan=False, default=_plain), encoding="utf-8")
    return path
