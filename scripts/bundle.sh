#!/usr/bin/env bash
# make bundle: one relocatable tarball that runs taillab on a host that cannot install
# anything (a testbed or cluster node): the stripped binary, the shared libraries it links
# that a bare Debian/Ubuntu lacks, the Python package with wheels of the dependencies such a
# host rarely has (hdrhistogram, pbr), bench/ and configs/. See docs/bundle.md.
#
# Usage: scripts/bundle.sh [OUT.tar.gz]   (default target/taillab-bundle.tar.gz)
# Needs the release binary (make build) and, for the wheels, PyPI (cached in target/).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/taillab-bundle.tar.gz}
bin=target/release/taillab
[ -x "$bin" ] || { echo "bundle: $bin is missing: run make build first" >&2; exit 2; }

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
b=$stage/taillab-bundle
mkdir -p "$b"/{libexec,lib,bin,wheels}

# The binary without its debug info (≈ 250 MB -> ≈ 30 MB).
objcopy --strip-debug "$bin" "$b/libexec/taillab"

# Shared libraries: everything it links except the C runtime every Linux has (glibc and the
# compiler's libgcc_s), copied through their symlinks (Debian's BLAS/LAPACK are alternatives).
ldd "$bin" | awk '$3 ~ /^\// {print $1, $3}' | while read -r name path; do
  case "$name" in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|libgcc_s.so.*|ld-linux*) ;;
    *) cp -L "$path" "$b/lib/$name" ;;
  esac
done

# Wheels of what the Python package needs beyond numpy/pandas/scipy/matplotlib/scikit-learn,
# for the CPython versions a host may have (a binary wheel per version; pbr is pure Python):
# hdrhistogram. A wheel that cannot be had fails the build, in one line: a bundle without it
# would fail later, on the host that cannot install anything. (`taillab attribute`'s analysis
# needs only scipy's HiGHS.)
# pyarrow is not carried: one wheel is ~55 MB, the whole budget. The bundle's runs write CSV
# records (record.format's default), which the package reads without it; Parquet records need
# pyarrow on the host (docs/bundle.md).
cache=target/bundle-wheels
mkdir -p "$cache"
py=${TAILLAB_PYTHON:-python3}
wheel() {  # NAME VERSION PYVERSION: the cached wheel, downloaded once
  local tag=cp${3/./}
  ls "$cache"/"$1"-"$2"-"$tag"-*.whl >/dev/null 2>&1 && return 0
  "$py" -m pip download -q --only-binary=:all: --no-deps --python-version "$3" \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux_2_27_x86_64 --platform manylinux_2_28_x86_64 \
    -d "$cache" "$1==$2" >/dev/null 2>&1 && ls "$cache"/"$1"-"$2"-"$tag"-*.whl >/dev/null 2>&1 \
    || { echo "bundle: cannot get the $1 $2 wheel for Python $3 (pip download from PyPI into $cache failed): the bundle would lack it" >&2; exit 2; }
}
for v in 3.10 3.11 3.12 3.13; do
  wheel hdrhistogram 0.10.8 "$v"
done
ls "$cache"/pbr-*.whl >/dev/null 2>&1 || "$py" -m pip download -q --no-deps -d "$cache" "pbr" >/dev/null \
  || { echo "bundle: cannot get the pbr wheel (hdrhistogram needs it) from PyPI into $cache" >&2; exit 2; }
for f in "$cache"/hdrhistogram-*.whl "$cache"/pbr-*.whl; do
  cp "$f" "$b/wheels/"
done

mkdir -p "$b/python"
cp -r python/taillab "$b/python/"
find "$b/python" -name __pycache__ -prune -exec rm -rf {} +
cp -r bench configs "$b/"

cat > "$b/bin/taillab" <<'EOF'
#!/bin/sh
# The bundled binary with the bundled libraries (only for it: nothing else sees them).
here=$(cd "$(dirname "$0")/.." && pwd)
LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$here/libexec/taillab" "$@"
EOF

cat > "$b/run" <<'EOF'
#!/bin/sh
# ./taillab-bundle/run CMD [ARGS]: runs CMD with the bundle's taillab first on PATH and its
# Python package importable. CMD may be a path inside the bundle (bench/manycore).
# With no CMD it prints what the bundle holds.
here=$(cd "$(dirname "$0")" && pwd)
py=${TAILLAB_PYTHON:-python3}
export PATH="$here/bin:$PATH" TAILLAB_BIN="$here/bin/taillab" TAILLAB_PYTHON="$py"
# The wheels, unpacked once per Python version (no pip needed: a wheel is a zip).
tag=$("$py" -c 'import sys; print("cp%d%d" % sys.version_info[:2])' 2>/dev/null || echo none)
lib="$here/pylib/$tag"
if [ "$tag" != none ] && [ ! -d "$lib" ]; then
  "$py" - "$here/wheels" "$lib" "$tag" <<'PY'
import os, shutil, sys, zipfile
src, dst, tag = sys.argv[1:]
# Each run unpacks into its own folder and renames it into place: runs started together
# (side by side on one host) neither collide nor see a half-unpacked folder.
tmp = f"{dst}.tmp{os.getpid()}"
os.makedirs(tmp)
for w in sorted(os.listdir(src)):
    if w.endswith(".whl") and ("-py3-" in w or "-py2.py3-" in w or f"-{tag}-" in w):
        zipfile.ZipFile(os.path.join(src, w)).extractall(tmp)
try:
    os.rename(tmp, dst)
except OSError:  # another run put its copy there first
    shutil.rmtree(tmp)
PY
fi
export PYTHONPATH="$here/python:$lib${PYTHONPATH:+:$PYTHONPATH}"
if [ $# -eq 0 ]; then
  echo "taillab bundle: $(cat "$here/VERSION")"
  echo "usage: $0 CMD [ARGS]   e.g. $0 bench/manycore, $0 taillab run --app synth --qps 1000 --requests 10000 --out r"
  exit 0
fi
cmd=$1; shift
if [ ! -e "$cmd" ] && [ -e "$here/$cmd" ]; then cmd="$here/$cmd"; fi
exec "$cmd" "$@"
EOF
chmod +x "$b/run" "$b/bin/taillab"

{
  echo "taillab $(git describe --always --dirty 2>/dev/null || echo unknown), built $(date -u +%Y-%m-%dT%H:%MZ) on $(. /etc/os-release && echo "$PRETTY_NAME"), glibc $(ldd --version | head -1 | awk '{print $NF}')"
  echo "libraries: $(ls "$b/lib" | tr '\n' ' ')"
} > "$b/VERSION"

mkdir -p "$(dirname "$out")"
tar -C "$stage" -czf "$out" taillab-bundle
size=$(du -m "$out" | cut -f1)
echo "bundle: $out (${size} MiB): tar xzf it anywhere, then ./taillab-bundle/run bench/manycore"
if [ "$size" -gt 80 ]; then
  echo "bundle: $out is ${size} MiB, over the 80 MiB budget" >&2
  exit 1
fi
