#!/usr/bin/env bash
# weir vs NATS JetStream (and kfake) side by side, with the raw hardware: see docs/bench.md.
#   bench/run.sh [-quick] [-rounds N] [-out DIR] [-dir DATA_PARENT]
set -euo pipefail
cd "$(dirname "$0")"
exec go run . "$@"
