#!/usr/bin/env bash
# The main job: an integrated load sweep of the synthetic app (M/M/1 with a
# 200 µs mean service time) at three loads, with the queueing-theory value
# beside each measurement.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-results/demo}
mkdir -p "$out"
for qps in 1000 2500 4000; do
  target/release/taillab run --app synth --config integrated --qps "$qps" --threads 1 \
    --warmup-seconds 1 --duration 8s --seed 7 --set service=exp:200us \
    --out "$out/qps-$qps" -q >/dev/null
done
python3 - "$out" <<'PY'
import json, math, pathlib, sys
out = pathlib.Path(sys.argv[1])
print(f"synth exp:200us, 1 worker, integrated — results in {out}")
print(f"{'qps':>6} {'rho':>5} {'mean us':>9} {'theory':>8} {'p99 us':>9} {'theory':>8} {'achieved':>9}  checks")
for d in sorted(out.glob("qps-*"), key=lambda p: int(p.name[4:])):
    s = json.load(open(d / "summary.json"))
    lam, soj = s["offered_qps"], s["latency_ns"]["sojourn"]
    mu = 1e9 / 200e3
    bad = [k for k, c in s["checks"].items() if not c["ok"]]
    print(f"{lam:>6.0f} {lam/mu:>5.2f} {soj['mean']/1e3:>9.1f} {1e6/(mu-lam):>8.1f} "
          f"{soj['p99']/1e3:>9.1f} {math.log(100)/(mu-lam)*1e6:>8.1f} {s['achieved_qps']:>9.1f}  "
          f"{'ok' if not bad else 'FAILED: ' + ', '.join(bad)}")
PY
