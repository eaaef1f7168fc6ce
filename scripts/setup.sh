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
# --no-compile: pip would byte-compile every module of every package (torch alone has thousands),
# which costs minutes on 2 cores; Python compiles the modules actually imported on first use instead.
if [ "$LIGHT" = 1 ]; then
    .venv/bin/python -m pip install -q --no-compile -c requirements/constraints.txt -r requirements/examples.txt
    exit 0
fi
.venv/bin/python -m pip install -q --no-compile -c requirements/constraints.txt -r requirements/dev.txt
# LitData (test peer) without its torchvision requirement; see requirements/dev.txt.
.venv/bin/python -m pip install -q --no-compile --no-deps -c requirements/constraints.txt litdata==0.2.76
bash scripts/install_servers.sh
