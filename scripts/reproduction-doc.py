#!/usr/bin/env python3
"""Print docs/reproduction.md from the verdicts of `taillab reproduce`, kept in the repository.

    .venv/bin/python scripts/reproduction-doc.py [ROOT ...] [--quick-root QROOT] \
        [--kept docs/reproduction] [--items configs/reproduce/items.toml] > docs/reproduction.md

Each ROOT (and QROOT) is a folder `taillab reproduce ID|all [--quick] --out ROOT` wrote. Its
items' verdict.json files are kept first, in the repository: under `docs/reproduction/full/<id>/`
for the full variant and `docs/reproduction/quick/<id>/` for --quick (each verdict says which
it is), replacing the same items' kept verdicts. The doc is then made from what is kept: the
full verdicts, and the quick ones standing in, marked, for the items with no full verdict yet.
So a full run (about three and a half hours on a 2-vCPU VM: `taillab reproduce --list`) can be
made item by item over several sessions and machines and still add up (each row names its
machine when they differ). A later full run of an item moves the verdict it replaces to
`docs/reproduction/full/<id>/earlier/`, and the doc says whether the verdict held from run to
run (python/taillab/reproduce/rerun.py). With no ROOT the doc is made again from what is kept. The items' runs and pages
stay where they ran: a verdict is a few kB, a run's records are not. Nothing is measured or
typed here.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def keep(root: Path, kept: Path, items: str) -> list[str]:
    """Copies ROOT's verdicts (those `read_verdicts` accepts) into kept/full or kept/quick;
    the items it kept."""
    from taillab.reproduce import read_verdicts
    from taillab.reproduce.rerun import EARLIER, stamp
    from taillab.reproduce.verdict import read_json

    done = []
    for iid, _, doc in read_verdicts(root, items):
        if doc is None:
            continue
        dest = kept / ("quick" if doc.get("quick") else "full") / iid / "verdict.json"
        dest.parent.mkdir(parents=True, exist_ok=True)
        src = root / iid / "verdict.json"
        had = read_json(dest) if dest.is_file() else {}
        if not doc.get("quick") and had and had.get("started_at") != doc.get("started_at"):
            # Another full run of the item: the older of the two goes to earlier/, so the doc
            # can say whether the verdict held from run to run.
            (dest.parent / EARLIER).mkdir(exist_ok=True)
            if str(had.get("started_at") or "") <= str(doc.get("started_at") or ""):
                shutil.copyfile(dest, dest.parent / EARLIER / stamp(had))
                shutil.copyfile(src, dest)
            else:  # an older run given after a newer one
                shutil.copyfile(src, dest.parent / EARLIER / stamp(doc))
        else:
            shutil.copyfile(src, dest)
        done.append(iid)
    if not done:
        raise SystemExit(
            f"reproduction-doc: no item's verdict.json in {root}: give the folder "
            "`taillab reproduce --out` wrote"
        )
    return done


def main() -> int:
    sys.path.insert(0, str(REPO / "python"))
    from taillab.errors import TaillabError
    from taillab.reproduce import markdown

    ap = argparse.ArgumentParser(description="Print docs/reproduction.md.")
    ap.add_argument(
        "roots", nargs="*", metavar="ROOT", help="folders `taillab reproduce` wrote"
    )
    ap.add_argument(
        "--items",
        default=str(REPO / "configs" / "reproduce" / "items.toml"),
        help="items.toml (default: the repository's configs/reproduce/items.toml)",
    )
    ap.add_argument(
        "--quick-root", help="a `taillab reproduce --quick` folder (kept like a ROOT)"
    )
    ap.add_argument(
        "--kept",
        default=str(REPO / "docs" / "reproduction"),
        help="where the verdicts are kept (default: docs/reproduction)",
    )
    args = ap.parse_args()
    kept = Path(args.kept).resolve()
    try:
        for root in [*args.roots, *([args.quick_root] if args.quick_root else [])]:
            done = keep(Path(root), kept, args.items)
            print(
                f"reproduction-doc: kept {len(done)} verdicts of {root}",
                file=sys.stderr,
            )
        for sub in ("full", "quick"):
            (kept / sub).mkdir(parents=True, exist_ok=True)
        print(
            markdown(kept / "full", args.items, repo=REPO, quick_root=kept / "quick"),
            end="",
        )
    except TaillabError as e:
        print(f"reproduction-doc: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
