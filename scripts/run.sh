#!/usr/bin/env bash
# Sets up (idempotent) and runs the main job: local Neo4j, knowledge, one optimization on the emulated K1,
# then serves the API and the web page (pass --exit to stop after printing the result).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec eok up "$@"
