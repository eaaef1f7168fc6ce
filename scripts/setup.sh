#!/usr/bin/env bash
# Creates .venv and installs litstream with its pinned development and test dependencies.
# Safe to re-run: pip skips what is already installed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade "pip>=24" >/dev/null
# torch is pinned through the constraint file so nothing upgrades it to a CUDA build.
.venv/bin/python -m pip install -q -c requirements/constraints.txt -r requirements/dev.txt
# LitData (test peer) without its torchvision requirement; see requirements/dev.txt.
.venv/bin/python -m pip install -q --no-deps -c requirements/constraints.txt litdata==0.2.76
# mosaicml-streaming (test peer for MDS) without its dependencies; see requirements/dev.txt.
.venv/bin/python -m pip install -q --no-deps -c requirements/constraints.txt mosaicml-streaming==0.13.0
bash scripts/install_servers.sh
