#!/usr/bin/env bash
# Installs what EoK needs on Debian 12 or Ubuntu 22.04+ (idempotent; a second call takes about a second):
#   scripts/setup.sh           what `scripts/run.sh` needs: clang-22/lld-22/llvm-22, qemu-user and the riscv64
#                              C library, a JDK and Maven (the local Neo4j), and the Python package
#   scripts/setup.sh --tests   the same plus what only the tests use: an SSH server (the stand-in board),
#                              chromium + chromium-driver (the web page test), docker-compose (validates
#                              docker-compose.yml) and the Python dev tools (pytest, ruff, ...)
# Python lives in the project-local virtual environment .venv (python3 -m venv, the distribution's python3):
# nothing is installed into the machine-wide Python. Commands run as .venv/bin/eok.
# System packages are installed only when missing; without root, through sudo (it asks for your password)
# or, when sudo is absent, by printing the exact apt-get line to run as root.
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "eok setup: $*"; }
die() {
  echo "eok setup: error: $*" >&2
  exit 1
}

TESTS=0
case "${1:-}" in
  --tests) TESTS=1 ;;
  "") ;;
  *) die "unknown option '$1': use 'scripts/setup.sh' (run) or 'scripts/setup.sh --tests' (run + tests)" ;;
esac

command -v apt-get >/dev/null && command -v dpkg-query >/dev/null ||
  die "this machine has no apt-get (not Debian/Ubuntu): use the Docker route in README.md"

# --- system packages ----------------------------------------------------------------------------------
. /etc/os-release
# The distribution's own Python 3.11+ (not one on PATH from pyenv/conda): Ubuntu 22.04's python3 is 3.10,
# its python3.11 package is the one to use there.
PY=/usr/bin/python3
PY_PACKAGES=(python3 python3-venv)
if [ -x /usr/bin/python3 ] && ! /usr/bin/python3 -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  PY=/usr/bin/python3.11
  PY_PACKAGES=(python3.11 python3.11-venv)
fi
RUN_PACKAGES=(
  "${PY_PACKAGES[@]}" git ca-certificates
  clang-22 llvm-22 lld-22                                        # RVV intrinsics for -mcpu=spacemit-x60, llvm-mca
  qemu-user libc6-dev-riscv64-cross libgcc-12-dev-riscv64-cross  # the emulated K1 and its C library
  libstdc++-12-dev-riscv64-cross make gcc cmake ninja-build      # eok upstream build: OpenBLAS's make, ggml's CMake
  openjdk-17-jdk-headless maven                                  # builds and runs the local Neo4j
)
TEST_PACKAGES=(openssh-server openssh-client docker-compose)
if [ "${ID:-}" = ubuntu ]; then
  TEST_PACKAGES+=(chromium-browser chromium-chromedriver)  # Ubuntu's names (snap-backed)
else
  TEST_PACKAGES+=(chromium chromium-driver)
fi
WANTED=("${RUN_PACKAGES[@]}")
((TESTS)) && WANTED+=("${TEST_PACKAGES[@]}")

missing=()
for p in "${WANTED[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

SUDO=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then
    SUDO=(sudo)
  elif ((${#missing[@]})); then
    die "missing system packages and no sudo; as root run:
  apt-get update && apt-get install -y --no-install-recommends ${missing[*]}
then run this script again"
  fi
fi

# grep reads all of apt-cache's output (no -q): an early exit would SIGPIPE apt-cache and pipefail would
# report "no candidate" for a package that has one.
has_candidate() { apt-cache policy "$1" 2>/dev/null | grep 'Candidate: [0-9]' >/dev/null; }

if ((${#missing[@]})); then
  say "installing ${#missing[@]} system packages: ${missing[*]}"
  say "a first install of these takes 0.9 GB of disk (1.3 GB with --tests) and a few minutes"
  ((${#SUDO[@]})) && say "sudo will ask for your password (or run as root: apt-get install -y ${missing[*]})"
  "${SUDO[@]}" apt-get update -qq
  if [[ " ${missing[*]} " == *" clang-22 "* ]] && ! has_candidate clang-22; then
    # Debian 12 ships clang-22 in bookworm-security; Ubuntu gets it from the LLVM project's own archive.
    say "clang-22 is not in your apt sources: adding apt.llvm.org (llvm-toolchain-${VERSION_CODENAME}-22)"
    "${SUDO[@]}" install -d -m 0755 /etc/apt/keyrings
    key=$($PY -c 'import urllib.request,sys; print(urllib.request.urlopen("https://apt.llvm.org/llvm-snapshot.gpg.key", timeout=30).read().decode())' 2>/dev/null) ||
      die "clang-22 is in none of your apt sources and apt.llvm.org cannot be reached; install clang-22, llvm-22 and lld-22 by hand, then run this script again"
    printf '%s\n' "$key" | "${SUDO[@]}" tee /etc/apt/keyrings/apt.llvm.org.asc >/dev/null
    echo "deb [signed-by=/etc/apt/keyrings/apt.llvm.org.asc] http://apt.llvm.org/${VERSION_CODENAME}/ llvm-toolchain-${VERSION_CODENAME}-22 main" |
      "${SUDO[@]}" tee /etc/apt/sources.list.d/llvm-22.list >/dev/null
    "${SUDO[@]}" apt-get update -qq
  fi
  DEBIAN_FRONTEND=noninteractive "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# pip's own lines, only those that show progress (a package being fetched or installed), each with the
# minutes:seconds since the step began: a long download is never minutes of silence.
_pip_progress() {
  local t0=$SECONDS line
  while IFS= read -r line; do
    case "$line" in
      Collecting* | Downloading* | *Downloading* | Installing* | Successfully*)
        printf '  [%d:%02d] %s\n' $(((SECONDS - t0) / 60)) $(((SECONDS - t0) % 60)) "${line#"${line%%[! ]*}"}" ;;
    esac
  done
}

# --- the project-local virtual environment --------------------------------------------------------------
VENV=.venv
if ! "$VENV/bin/python" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  say "creating the virtual environment $VENV with $PY ($($PY -V 2>&1))"
  rm -rf "$VENV"
  $PY -m venv "$VENV"
fi
EXTRAS=$( ((TESTS)) && echo "[dev]" || echo "")
# Reinstall only when pyproject.toml or the wanted extras changed since the last successful install
# (an install with the dev extras also serves the run).
STAMP="$VENV/.eok-installed"
hash=$(sha256sum pyproject.toml | cut -d' ' -f1)
stamp=$(cat "$STAMP" 2>/dev/null || true)
if [ "$stamp" != "$hash [dev]" ] && [ "$stamp" != "$hash $EXTRAS" ]; then
  say "installing Python packages into $VENV${EXTRAS:+ (with the test tools)}"
  started=$SECONDS
  if ! "$VENV/bin/python" -c 'import torch' 2>/dev/null; then
    # Measured on Debian 12, 2 shared cores: 3 (fast network, idle) to 17 (loaded) minutes, 6.2-6.5 GB.
    say "the first time takes 3-17 minutes and about 6.5 GB of disk (torch from PyPI brings its CUDA"
    say "libraries; less when download.pytorch.org's CPU-only build is reachable); pip names each package"
    # sentence-transformers needs torch; its CPU-only build is 0.2 GB against 4+ GB with the CUDA libraries.
    "$VENV/bin/pip" install --progress-bar off --retries 0 --timeout 15 torch \
      --index-url https://download.pytorch.org/whl/cpu 2>/dev/null | _pip_progress ||
      say "download.pytorch.org is not reachable: torch comes from PyPI with its CUDA libraries"
  fi
  # pip keeps its wheel cache (torch is large): never pass --no-cache-dir here.
  "$VENV/bin/pip" install --progress-bar off --disable-pip-version-check -e ".$EXTRAS" | _pip_progress
  say "Python packages installed in $(((SECONDS - started) / 60)) min $(((SECONDS - started) % 60)) s; $VENV takes $(du -sh "$VENV" | cut -f1)"
  echo "$hash $EXTRAS" >"$STAMP"
fi

"$VENV/bin/python" - <<'PY'
from core.settings import get_settings
from knowledge import local_neo4j
print("eok setup: neo4j launcher at", local_neo4j.ensure_built(get_settings()))
PY
say "done; the CLI is $VENV/bin/eok (or 'source $VENV/bin/activate' and then 'eok')"
