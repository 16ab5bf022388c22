#!/usr/bin/env bash
# Sets up (idempotent: only what the main job needs, the project's .venv) and runs the main job: local
# Neo4j, knowledge, one optimization on the emulated K1, then serves the API and the web page
# (pass --exit to stop after printing the result). `.venv/bin/eok db stop` stops the Neo4j it started.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec .venv/bin/eok up "$@"
