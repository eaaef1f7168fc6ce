#!/usr/bin/env bash
# Creates .venv and installs litstream. Two levels:
#   bash scripts/setup.sh --light   the package and what examples/ need (torch CPU, scikit-learn): README command 1
#   bash scripts/setup.sh           everything for development: test, lint, docs and build tools, LitData (the
#                                   compatibility peer) and the storage test servers: README command 2 and CI
# Safe to re-run: pip skips what is already installed. Set PYTHON to choose the interpreter (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
LIGHT=0
case "${1:-}" in
    --light) LIGHT=1 ;;
    "") ;;
    *) echo "usage: bash scripts/setup.sh [--light]" >&2; exit 2 ;;
esac
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --no-compile --upgrade "pip>=24" >/dev/null
# torch is pinned through the constraint file so nothing upgrades it to a CUDA build.
# --no-compile, then compile_venv: pip byte-compiles every module one file at a time (minutes on 2
# cores for torch alone); compileall does it on every core and skips the packages' own test suites.
# Compiled files matter: with PYTHONDONTWRITEBYTECODE set, Python never caches what it compiles.
compile_venv() {
    .venv/bin/python -m compileall -q -j 0 -x '[/\\]tests?[/\\]' .venv/lib/python*/site-packages >/dev/null || true
}
if [ "$LIGHT" = 1 ]; then
    .venv/bin/python -m pip install -q --no-compile -c requirements/constraints.txt -r requirements/examples.txt
    compile_venv
    exit 0
fi
.venv/bin/python -m pip install -q --no-compile -c requirements/constraints.txt -r requirements/dev.txt
# Chromium from the system's packages for the browser test (tests/view/test_view_browser.py drives it with Playwright,
# whose own browser download is never used). Installed when missing and we are root or have password-less sudo.
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ]; then
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
            || echo "setup.sh: could not install chromium; the browser test needs it" >&2
    elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        (sudo -n apt-get update -qq && sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium \
            >/dev/null) || echo "setup.sh: could not install chromium; the browser test needs it" >&2
    else
        echo "setup.sh: chromium is missing (apt-get install chromium); the browser test needs it" >&2
    fi
fi
# LitData (test peer) without its torchvision requirement; see requirements/dev.txt.
.venv/bin/python -m pip install -q --no-compile --no-deps -c requirements/constraints.txt litdata==0.2.76
# mosaicml-streaming (test peer for MDS) without its dependencies; see requirements/dev.txt.
.venv/bin/python -m pip install -q --no-compile --no-deps -c requirements/constraints.txt mosaicml-streaming==0.13.0
bash scripts/install_servers.sh
compile_venv
