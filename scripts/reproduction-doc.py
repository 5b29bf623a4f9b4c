#!/usr/bin/env python3
"""Print docs/reproduction.md from the results of `taillab reproduce all`.

    .venv/bin/python scripts/reproduction-doc.py ROOT [--quick-root QROOT] \
        [--items configs/reproduce/items.toml] > docs/reproduction.md

ROOT is the folder `taillab reproduce all [--quick] --out ROOT` wrote (each item's
verdict.json is read; nothing is measured or typed here). A full run takes hours (about three
on a 2-vCPU VM: `taillab reproduce --list`) and may be made item by item over several days (`taillab reproduce ID --out
ROOT`); until it has every item, `--quick-root` names a `--quick` run whose verdicts stand in
for the missing ones, each marked so. Items' pages are linked when ROOT
lies inside this repository; otherwise the table carries the verdicts' numbers only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    sys.path.insert(0, str(REPO / "python"))
    from taillab.errors import TaillabError
    from taillab.reproduce import markdown

    ap = argparse.ArgumentParser(description="Print docs/reproduction.md.")
    ap.add_argument("root", help="the folder `taillab reproduce all` wrote")
    ap.add_argument(
        "--items",
        default=str(REPO / "configs" / "reproduce" / "items.toml"),
        help="items.toml (default: the repository's configs/reproduce/items.toml)",
    )
    ap.add_argument(
        "--quick-root",
        help="a `taillab reproduce all --quick` folder whose verdicts stand in, marked, for the "
        "items ROOT does not have yet",
    )
    args = ap.parse_args()
    try:
        print(
            markdown(args.root, args.items, repo=REPO, quick_root=args.quick_root),
            end="",
        )
    except TaillabError as e:
        print(f"reproduction-doc: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
