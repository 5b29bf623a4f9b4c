"""``python -m taillab report|compare ...``: what ``taillab report`` and ``taillab compare`` run.

Exit codes: 0 done, 2 bad input (one line on stderr saying what to fix). Other subcommands
(e.g. ``fit``) register themselves in ``COMMANDS``.
"""

from __future__ import annotations

import argparse
import sys

from .errors import TaillabError


def _report(args) -> int:
    from .report import write_report

    page = write_report(args.results, args.out)
    print(page)
    return 0


def _compare(args) -> int:
    from .compare import compare, text_summary, write_compare
    from .results import load

    a, b = load(args.a), load(args.b)
    page = write_compare(a, b, args.out)
    print(text_summary(compare(a, b)))
    print(page)
    return 0


def _add_report(sub) -> None:
    p = sub.add_parser(
        "report",
        help="write an HTML report of a results folder",
        description="Write DIR/index.html (default RESULTS/report/) with the "
        "figures, a table per point, run metadata and links to the raw files.",
    )
    p.add_argument("results", help="a run, experiment or sweep folder")
    p.add_argument("--out", metavar="DIR", help="output folder (default RESULTS/report)")
    p.set_defaults(func=_report)


def _add_compare(sub) -> None:
    p = sub.add_parser(
        "compare",
        help="compare two results folders (before/after)",
        description="Match the load points of A and B, test each difference "
        "and write DIR/index.html and compare.csv (default B/compare/).",
    )
    p.add_argument("a", help="results folder before (A)")
    p.add_argument("b", help="results folder after (B)")
    p.add_argument("--out", metavar="DIR", help="output folder (default B/compare)")
    p.set_defaults(func=_compare)


def _fit(args) -> int:
    import json

    from .fit import fit_results, text_summary, write_fit

    doc = fit_results(
        args.results,
        point=args.point,
        components=args.components,
        max_components=args.max_components,
    )
    if args.out:
        path = write_fit(doc, args.out)
    if args.json:
        print(json.dumps(doc, indent=1, allow_nan=False))
    else:
        print(text_summary(doc))
        if args.out:
            print(path)
    refused = [f for f in doc["fits"] if "error" in f]
    for f in refused:
        print(f"taillab: error: {f['error']}", file=sys.stderr)
    return 2 if refused else 0


def _add_fit(sub) -> None:
    p = sub.add_parser(
        "fit",
        help="fit measured service times with a mixture of log-normals",
        description="Fit each point's service times (requests.csv when saved, else the "
        "service histogram) with a mixture of 1-5 log-normal components by maximum "
        "likelihood, the number chosen by BIC; print the components, the goodness of fit "
        "and the synth spec that reproduces them.",
    )
    p.add_argument("results", help="a run or experiment folder")
    p.add_argument("--point", metavar="ID", help="fit only this point of an experiment")
    p.add_argument("--json", action="store_true", help="print the fit as JSON (fit.json)")
    p.add_argument("--out", metavar="DIR", help="write DIR/fit.json and DIR/fit-figures/")
    p.add_argument("--components", type=int, choices=range(1, 6), metavar="K", help="fix K (1-5)")
    p.add_argument(
        "--max-components",
        type=int,
        default=5,
        choices=range(1, 6),
        metavar="K",
        help="largest K BIC may choose (default 5)",
    )
    p.set_defaults(func=_fit)


COMMANDS = [_add_report, _add_compare, _add_fit]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m taillab", description="taillab analysis: reports and comparisons"
    )
    sub = ap.add_subparsers(dest="command", required=True)
    for add in COMMANDS:
        add(sub)
    args = ap.parse_args(argv)
    try:
        return args.func(args)
    except TaillabError as e:
        print(f"taillab: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
