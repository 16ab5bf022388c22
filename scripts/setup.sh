#!/usr/bin/env bash
# Installs everything EoK needs on Debian 12 (idempotent): toolchains and emulator from Debian, the Python
# package with its dependencies from PyPI, and the local Neo4j launcher from Maven Central.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  clang-22 llvm-22 lld-22                                  # RVV intrinsics for -mcpu=spacemit-x60, llvm-mca X60 model
  qemu-user libc6-dev-riscv64-cross libgcc-12-dev-riscv64-cross  # emulated K1 and its C library
  openssh-server openssh-client                            # the ssh runner and its local stand-in board
  chromium chromium-driver                                 # the web page test
  openjdk-17-jdk-headless maven                            # the local Neo4j
  docker-compose                                           # validates docker-compose.yml (no engine needed)
  git util-linux procps coreutils libc6-dev
)
missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "eok setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
# pip keeps its wheel cache (torch is large): never pass --no-cache-dir here.
$PY -m pip install -q -e ".[dev]"

$PY - <<'PY'
from core.settings import get_settings
from knowledge import local_neo4j
print("eok setup: neo4j launcher at", local_neo4j.ensure_built(get_settings()))
PY
echo "eok setup: done"
