#!/usr/bin/env bash
# Regenerates the golden results folders the Python tests read, with the real binary.
# Kept small on purpose (short runs; requests.csv only where a test needs it, < 200 KB).
# Run from anywhere: tests/data/regen.sh   (builds target/release/taillab first)
#
#   run-synth/   one run, M/M/1 at rho = 0.1, with requests.csv
#   run-stall/   one run with a 300 ms server stall 1 s into the measured phase (a hiccup)
#   loads/       a plain folder of three runs at rho = 0.1, 0.3, 0.5 (what make demo writes)
#   repeat/      `taillab run --ci`: an experiment of kind "run", one point, 3 runs
#   sweep/       `taillab sweep`: 1 and 2 threads x two loads, 2 runs per point
#   run-explained/  one run with --explain (its anatomy and x_* columns; as root only)
#   (run-v1/     a run written as taillab.run/1, kept as it is: not rebuilt here)
#
# Timings on a loaded machine make the tails long and some checks fail; the tests only rely
# on what holds anyway (the files agree with each other, latency grows with load).
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -q --bin taillab
bin=target/release/taillab
data=tests/data

common=(--app synth --config integrated --threads 1 --warmup-seconds 0.5 -q)
rm -rf "$data/run-synth" "$data/run-stall" "$data/loads" "$data/repeat" "$data/sweep"
if [ "$(id -u)" -eq 0 ]; then
  rm -rf "$data/run-explained"
  "$bin" run --app synth --threads 1 --qps 1000 --warmup-requests 100 --requests 500 -q \
    --seed 16 --set service=exp:200us --explain --save-requests --out "$data/run-explained" >/dev/null
else
  echo "regen: not root: tests/data/run-explained (--explain) kept as it is" >&2
fi

"$bin" run "${common[@]}" --qps 500 --duration 2s --seed 11 --set service=exp:200us \
  --save-requests --out "$data/run-synth" >/dev/null
"$bin" run "${common[@]}" --qps 1000 --duration 3s --seed 12 --set service=exp:200us \
  --set stall=at:1s,for:300ms --out "$data/run-stall" >/dev/null
for qps in 500 1500 2500; do
  "$bin" run "${common[@]}" --qps "$qps" --duration 2s --seed 13 --set service=exp:200us \
    --out "$data/loads/qps-$qps" >/dev/null
done
"$bin" run "${common[@]}" --qps 800 --duration 1s --seed 14 --set service=exp:200us \
  --ci 0.5 --min-runs 3 --max-runs 3 --out "$data/repeat" >/dev/null
"$bin" sweep --app synth --configs integrated --threads 1,2 --qps 500,1500 \
  --duration 1s --warmup-seconds 0.3 --seed 15 --set service=exp:200us \
  --ci 0.5 --min-runs 2 --max-runs 2 --out "$data/sweep" -q >/dev/null
du -sh "$data"/run-explained "$data"/run-synth "$data"/run-stall "$data"/loads "$data"/repeat "$data"/sweep
