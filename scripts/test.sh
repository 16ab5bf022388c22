#!/usr/bin/env bash
# Sets up (idempotent: system packages for the tests, the project's .venv) and runs the whole test suite
# against the real Neo4j, qemu and compilers with the .venv's Python. Arguments go to pytest.
# EOK_SETUP=done skips the setup step (for a caller that has just run `scripts/setup.sh --tests`, as CI does).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${EOK_SETUP:-}" = done ] || scripts/setup.sh --tests
exec .venv/bin/python -m pytest -q "$@"
