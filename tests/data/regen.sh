#!/usr/bin/env bash
# Regenerates the golden results folders the Python tests read, with the real binary.
# Kept small on purpose (short runs; requests.csv only where a test needs it, < 200 KB).
# Run from anywhere: tests/data/regen.sh   (builds target/release/taillab first)
#
#   run-synth/   one run, M/M/1 at rho = 0.1, with requests.csv
#   run-stall/   one run with a 300 ms server stall 1 s into the measured phase (a hiccup)
#   loads/       a plain folder of three runs at rho = 0.1, 0.3, 0.5 (what make demo writes)
#
# The experiment/sweep layout (experiment.json, points/*/aggregate.json) is not written by
# the binary yet; python/tests/fixtures.py covers it until `taillab sweep` lands.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -q --bin taillab
bin=target/release/taillab
data=tests/data

common=(--app synth --config integrated --threads 1 --warmup-seconds 0.5 -q)
rm -rf "$data/run-synth" "$data/run-stall" "$data/loads"

"$bin" run "${common[@]}" --qps 500 --duration 2s --seed 11 --set service=exp:200us \
  --save-requests --out "$data/run-synth" >/dev/null
"$bin" run "${common[@]}" --qps 1000 --duration 3s --seed 12 --set service=exp:200us \
  --set stall=at:1s,for:300ms --out "$data/run-stall" >/dev/null
for qps in 500 1500 2500; do
  "$bin" run "${common[@]}" --qps "$qps" --duration 2s --seed 13 --set service=exp:200us \
    --out "$data/loads/qps-$qps" >/dev/null
done
du -sh "$data"/run-synth "$data"/run-stall "$data"/loads
