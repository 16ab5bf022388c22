#!/usr/bin/env bash
# Sets up (idempotent: system packages for the tests, the project's .venv) and runs the whole test suite
# against the real Neo4j, qemu and compilers with the .venv's Python. Arguments go to pytest.
# EOK_SETUP=done skips the setup step (for a caller that has just run `scripts/setup.sh --tests`, as CI does).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${EOK_SETUP:-}" = done ] || scripts/setup.sh --tests
# Two pytest-xdist workers by default (EOK_TEST_WORKERS=1: one process): a serial run keeps one of two cores
# busy, and each worker has its own Neo4j (tests/conftest.py). A file's tests stay on one worker, so the
# expensive fixtures a file shares are built once. Arguments after these win (e.g. `-n 0`).
workers=${EOK_TEST_WORKERS:-2}
parallel=()
if [ "$workers" -gt 1 ]; then parallel=(-n "$workers" --dist loadfile); fi
exec .venv/bin/python -m pytest -q "${parallel[@]}" "$@"
