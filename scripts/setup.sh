#!/usr/bin/env bash
# Idempotent setup for a fresh Debian 12 machine: system packages listed in
# */apt.txt, the Rust toolchain check, the project's Python venv (.venv) with
# the packages in */pip.txt, and the python/ package. Safe to run every time:
# it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

sudo_if_needed() { if [ "$(id -u)" -ne 0 ]; then sudo "$@"; else "$@"; fi; }

lists() { ls apt.txt */apt.txt apps/*/apt.txt 2>/dev/null || true; }
missing=()
for f in $(lists); do
  while read -r line; do
    pkg=$(echo "${line%%#*}" | xargs)
    [ -z "$pkg" ] && continue
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done < "$f"
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo_if_needed apt-get update -qq
  sudo_if_needed env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null; then
  echo "error: cargo not found. Install Rust (https://rustup.rs) and rerun; Debian's cargo is too old." >&2
  exit 2
fi

# Python: one venv for the analysis package and the apps' data preparation.
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  python3 -m venv .venv
fi
want=$(cat $(ls pip.txt */pip.txt apps/*/pip.txt 2>/dev/null) python/pyproject.toml 2>/dev/null | sha256sum | cut -d' ' -f1)
have=$(cat .venv/.taillab-stamp 2>/dev/null || true)
if [ "$want" != "$have" ]; then
  echo "setup: installing Python packages into .venv"
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  for f in $(ls pip.txt */pip.txt apps/*/pip.txt 2>/dev/null); do
    .venv/bin/python -m pip install -q -r "$f"
  done
  if [ -f python/pyproject.toml ]; then
    .venv/bin/python -m pip install -q -e python
  fi
  echo "$want" > .venv/.taillab-stamp
fi

# ghz (the Go gRPC load tool bench/grpc compares with) is built by scripts/ghz.sh when
# bench/grpc first needs it: the tests and the demo do not, and building it from the Go
# module proxy took minutes of every fresh machine's setup.
