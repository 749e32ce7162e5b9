#!/usr/bin/env bash
# Sets up, builds, and records the bundled contended example (3 CPU-bound threads + a napping thread):
# prints where the raw data and the Chrome trace went, and the per-thread summary.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
PYTHON=${PYTHON:-python3}
mkdir -p out
echo "+ build/cli/gilspy record -o out -- $PYTHON examples/contended.py 3"
exec build/cli/gilspy record -o out -- "$PYTHON" examples/contended.py 3
