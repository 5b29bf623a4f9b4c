#!/usr/bin/env bash
# The main job: the integrated load sweep of configs/demo.toml (synth, M/M/1
# with a 200 µs mean service time, five loads, repeated to a CI target), its
# table, and the queueing-theory value beside each point.
# OUT: the results folder; TAILLAB_BIN: the binary; TAILLAB_DEMO_FLAGS: flags added to the
# sweep (the docs test shortens it so).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-results/demo}
bin=${TAILLAB_BIN:-target/release/taillab}
rm -rf "$out"
# shellcheck disable=SC2086 # the flags are words
"$bin" sweep --file configs/demo.toml --out "$out" ${TAILLAB_DEMO_FLAGS:-}
echo
echo "M/M/1 theory for the same loads (mean and p99 sojourn):"
for qps in $(python3 -c "import tomllib;print(' '.join(str(q) for q in tomllib.load(open('configs/demo.toml','rb'))['load']['qps']))"); do
  "$bin" model --qps "$qps" --service exp:200us --requests 200000 | sed -n 2p | sed "s/^/  $qps qps: /"
done
if [ -x "${TAILLAB_PYTHON:-.venv/bin/python}" ] && "${TAILLAB_PYTHON:-.venv/bin/python}" -c "import taillab" 2>/dev/null; then
  "$bin" report "$out" --out "$out/report" && echo "report: $out/report/index.html"
fi
