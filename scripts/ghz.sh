#!/usr/bin/env bash
# Builds ghz, the Go gRPC load tool bench/grpc puts taillab beside, from the Go module proxy
# into .tools/bin (idempotent: nothing to do once it is there). bench/grpc runs this itself.
set -euo pipefail
cd "$(dirname "$0")/.."
GHZ_VERSION=v0.121.0
[ -x .tools/bin/ghz ] && exit 0
if ! command -v go >/dev/null; then
  echo "error: go not found: install Debian's golang-go (apt-get install golang-go) and rerun" >&2
  exit 2
fi
echo "ghz: building $GHZ_VERSION into .tools/bin (once)" >&2
GOBIN="$PWD/.tools/bin" go install "github.com/bojand/ghz/cmd/ghz@$GHZ_VERSION"
