"""``python -m taillab report|compare ...``: what ``taillab report`` and ``taillab compare`` run.

Exit codes: 0 done, 2 bad input (one line on stderr saying what to fix). Other subcommands
(e.g. ``fit``) register themselves in ``COMMANDS``.
"""

from __future__ import annotations

# The commands import their modules when they run: those load matplotlib (and write its
# caches), which `--help` or a bad argument should not pay for. That defers a heavy import;
# it dodges no cycle (scripts/import-cycles.py counts imports inside functions too).
import argparse
import json
import sys

from .errors import TaillabError


def _report(args) -> int:
    from .results import load

    # Refuse bad input before the plotting library starts (it writes caches).
    res = load(args.results)
    from .report import write_report

    page = write_report(res, args.out)
    print(page)
    return 0


def _compare(args) -> int:
    from .results import load

    # Refuse bad input before the plotting library starts (it writes caches).
    a, b = load(args.a), load(args.b)
    from .compare import compare, text_summary, write_compare

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
    from .fit import FitConfig, fit_results, text_summary, write_fit

    if args.fit_set == ["help"]:
        print(FitConfig.help())
        return 0
    doc = fit_results(
        args.results,
        point=args.point,
        pooled=args.pooled,
        cfg=FitConfig().with_settings(args.fit_set),
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
    p.add_argument(
        "--pooled",
        action="store_true",
        help="also fit one synthetic workload to the fewest-worker points together (entry "
        "'all'): a mixture and the optional terms (pauses, cold start, host speed, periodic "
        "request) that lower the error on held-out blocks of the records",
    )
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
    p.add_argument(
        "--fit-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting of the fit across loads (repeatable; --fit-set help lists every key "
        "with its default and reason)",
    )
    p.set_defaults(func=_fit)


def _saturation(text: str | None):
    """``5000`` (every thread count) or ``1=5000,2=9400`` (per thread count)."""
    if not text:
        return None
    try:
        if "=" not in text:
            return float(text)
        return {int(k): float(v) for k, v in (p.split("=") for p in text.split(","))}
    except ValueError as e:
        raise TaillabError(
            f"--saturation {text!r}: write one rate (5000) or threads=rate pairs (1=5000,2=9400)"
        ) from e


def _validate(args) -> int:
    from .fit import read_fit
    from .tailwag import error_table, summary, write_validation

    fit = None
    point_fits = None
    if args.fit:
        fits = [f for f in read_fit(args.fit)["fits"] if "error" not in f]
        point_fits = [f for f in fits if f["point"] != "all"]
        if args.fit_point:
            fits = [f for f in fits if f["point"] == args.fit_point]
        if not fits:
            raise TaillabError(
                f"{args.fit} holds no fit{' of ' + args.fit_point if args.fit_point else ''}"
            )
        fit = fits[0]
    sat = _saturation(args.saturation)
    synthetic = args.synthetic if len(args.synthetic) > 1 else args.synthetic[0]
    out = args.out or f"{args.synthetic[0]}/validation"
    rounds = [tuple(r) for r in args.round or []]
    page = write_validation(
        args.measured,
        synthetic,
        out,
        app=args.app,
        fit=fit,
        saturation_qps=sat,
        rounds=rounds,
        point_fits=point_fits,
    )
    table = error_table(args.measured, synthetic, saturation_qps=sat, rounds=rounds)
    summ = summary(table, loads=(0.2, 0.5, 0.7))
    _print_out_of_sample(summ)
    print(
        f"one worker, {summ['points']} point(s) at 20/50/70 % load"
        + (f", round 1 of {summ['rounds']} (in sample)" if summ.get("rounds", 1) > 1 else "")
        + (" (in sample: one round)" if summ.get("rounds", 1) == 1 else "")
        + ": mean |error| vs goal (TailWAG)"
    )
    for st, v in summ["stats"].items():
        err = v["mean_abs_error"]
        later, rep = v.get("later"), v.get("app_repeat")
        print(
            f"  {st:>4} {100 * err:5.1f}%  goal {100 * v['goal']:.0f}%  "
            f"({'met' if v['met'] else 'NOT met'}; TailWAG {100 * v['tailwag']:.1f}%)"
            + (
                f"  later rounds {100 * later:.1f}%, the app vs itself {100 * rep:.1f}%"
                if later is not None and rep is not None
                else ""
            )
            + (
                f"  noise floor {100 * v['noise_floor']:.1f}%"
                f" ({v['beyond_noise']} of {summ['points']} point(s) beyond it)"
                if v.get("noise_floor") is not None
                else ""
            )
            + (
                " (the host's noise is above the goal: these runs cannot resolve it"
                + (
                    f"; about {v['runs_to_resolve']} runs per point would"
                    if v.get("runs_to_resolve")
                    else ""
                )
                + ")"
                if v.get("resolvable") is False
                else ""
            )
        )
    print(page)
    return 0


def _print_out_of_sample(summ) -> None:
    """The validation's headline: the later rounds' errors against the floor of the same
    rounds, every point beyond it named, every unresolved one with the runs it needs."""
    oos = summ.get("out_of_sample")
    if not oos:
        return
    print(
        f"out of sample (later rounds), {oos['points']} one-worker point(s): mean |error| vs "
        "the floor of the same rounds (the app against itself, twice the se)"
    )
    for st, v in oos["stats"].items():
        print(
            f"  {st:>4} {100 * v['mean_abs_error']:5.1f}%  floor {100 * v['floor']:.1f}%  "
            f"goal {100 * v['goal']:.0f}%  points within {v['within the floor']}, beyond "
            f"{v['beyond it']}, unresolved {v['unresolved']}"
        )
    for b in oos["beyond"]:
        print(
            f"  beyond the floor: {b['point']} {b['stat']} {100 * b['error']:+.1f}% "
            f"± {100 * b['se']:.1f} (floor {100 * b['floor']:.1f}%): {b['term']}"
        )
    for u in oos["unresolved"]:
        runs = f"; about {u['runs']} blocks per point would resolve it" if u["runs"] else ""
        print(f"  unresolved: {u['point']} {u['stat']} (floor {100 * u['floor']:.1f}%{runs})")


def _add_validate(sub) -> None:
    p = sub.add_parser(
        "validate",
        help="compare a synthetic workload's results with the measured app's",
        description="Match the points of MEASURED and SYNTHETIC on threads and offered QPS, "
        "and write DIR/index.html, validation.csv and validation.json (default "
        "SYNTHETIC/validation/) with the error of sojourn mean, p95 and p99 per point and "
        "the figures (measured solid, synthetic dashed).",
    )
    p.add_argument("measured", help="results folder of the app")
    p.add_argument(
        "synthetic",
        nargs="+",
        help="results folder(s) of the synthetic workload at the same points (several: one "
        "per measured point, as `taillab tailwag --fit-at each` writes)",
    )
    p.add_argument("--out", metavar="DIR", help="output folder (default SYNTHETIC/validation)")
    p.add_argument(
        "--round",
        nargs=2,
        action="append",
        metavar=("MEASURED", "SYNTHETIC"),
        help="a further round at the same points (repeatable): statistics are of the "
        "histograms merged over all rounds, and the app's later rounds vs its first give the "
        "host's noise floor",
    )
    p.add_argument("--app", help="the measured app (its TailWAG Table 2 counterpart is shown)")
    p.add_argument("--fit", metavar="FIT_JSON", help="the fit the synthetic workload came from")
    p.add_argument("--fit-point", metavar="ID", help="which point of FIT_JSON (default: first)")
    p.add_argument(
        "--saturation",
        metavar="QPS",
        help="saturation rate(s) for the load axis: 5000 or 1=5000,2=9400 (default: utilization)",
    )
    p.set_defaults(func=_validate)


def _reproduce_page(args) -> int:
    from .reproduce import write_page

    print(write_page(args.id, args.folder, args.items, reuse=args.reuse, quick=args.quick))
    return 0


def _add_reproduce_page(sub) -> None:
    p = sub.add_parser(
        "reproduce-page",
        help="write an item's reproduction page and verdict (what `taillab reproduce` runs)",
        description="Read the results `taillab reproduce ID` wrote into FOLDER and write "
        "FOLDER/index.html (our figure, the paper's numbers, the verdict computed from the "
        "data) and FOLDER/verdict.json. Exits 0 whatever the verdict.",
    )
    p.add_argument("id", help="the item's id in items.toml")
    p.add_argument("folder", help="the item's results folder (ROOT/ID)")
    p.add_argument("--items", required=True, metavar="TOML", help="configs/reproduce/items.toml")
    p.add_argument("--reuse", metavar="DIR", help="the results folder of the item this one reads")
    p.add_argument("--quick", action="store_true", help="the results are of the --quick variant")
    p.set_defaults(func=_reproduce_page)


def _reproduce_index(args) -> int:
    from .reproduce import write_index

    print(write_index(args.root, args.items))
    return 0


def _add_reproduce_index(sub) -> None:
    p = sub.add_parser(
        "reproduce-index",
        help="write ROOT/index.html: every item's verdict, linking its page",
    )
    p.add_argument("root", help="the folder `taillab reproduce all` wrote")
    p.add_argument("--items", required=True, metavar="TOML", help="configs/reproduce/items.toml")
    p.set_defaults(func=_reproduce_index)


def _attribute(args) -> int:
    from .attribute import read_design

    # Refuse a folder that is no attribution before the plotting library starts.
    read_design(args.root)
    from .attribute import run, text_table

    doc = run(args.root, bootstrap=args.bootstrap, out_dir=args.out)
    print(text_table(doc), end="")
    out = args.out or f"{args.root}/attribution"
    print(f"attribution: {out}/attribution.json, page {out}/index.html")
    return 0


def _add_attribute(sub) -> None:
    p = sub.add_parser(
        "attribute",
        help="analyse a taillab attribute folder (quantile regression, cluster bootstrap)",
        description="Regress every request's sojourn, service and queue time on the design's "
        "factor levels (and two-way interactions) at p50/p95/p99 (p99.9 with enough requests), "
        "solved exactly as a linear program (HiGHS); CIs from a cluster bootstrap over runs. "
        "Writes "
        "ROOT/attribution/attribution.json and index.html and prints the table.",
    )
    p.add_argument("root", help="the folder taillab attribute wrote (design.json, points/)")
    p.add_argument("--bootstrap", type=int, default=200, help="bootstrap resamples (default 200)")
    p.add_argument("--out", metavar="DIR", help="output folder (default ROOT/attribution)")
    p.set_defaults(func=_attribute)


COMMANDS = [
    _add_report,
    _add_compare,
    _add_fit,
    _add_validate,
    _add_reproduce_page,
    _add_reproduce_index,
    _add_attribute,
]


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
