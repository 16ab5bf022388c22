#!/usr/bin/env bash
# Sets up (idempotent) and runs the whole test suite against the real Neo4j, qemu and compilers.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec python3 -m pytest -q "$@"
