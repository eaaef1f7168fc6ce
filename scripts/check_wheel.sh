#!/usr/bin/env bash
# Builds the wheel and smoke-tests it in a clean virtual environment (run by .ci/run).
# The wheel is installed with its dependencies (torch through requirements/constraints.txt, from
# pip's cache after the first run), then used from outside the source tree: version, command line,
# optimize + astream without torch, and a StreamingDataset read.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$PWD"
PY="${PYTHON:-python3}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
.venv/bin/python -m build --wheel --outdir "$WORK/dist" . >/dev/null
"$PY" -m venv "$WORK/venv"
"$WORK/venv/bin/python" -m pip install -q --no-compile -c "$ROOT/requirements/constraints.txt" "$WORK"/dist/litstream-*.whl
cd "$WORK"
expected="$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$ROOT/src/litstream/_version.py")"
test "$("$WORK/venv/bin/litstream" --version)" = "litstream $expected"
"$WORK/venv/bin/python" - <<'PY'
import sys

import anyio

import litstream as ls

assert ls.__file__.startswith(sys.prefix), ls.__file__  # the installed wheel, not the source tree
ls.optimize(fn=lambda i: {"i": i, "s": str(i)}, inputs=list(range(30)), output_dir="data", chunk_size=8,
            num_workers=1, verbose=False)


async def read() -> list[int]:
    return [s["i"] async for s in ls.astream("data")]


assert anyio.run(read) == list(range(30))
assert "torch" not in sys.modules, "the torch-free path imported torch"
assert sorted(s["i"] for s in ls.StreamingDataset("data", shuffle=True)) == list(range(30))
print(f"wheel OK: litstream {ls.__version__}")
PY
"$WORK/venv/bin/litstream" inspect data >/dev/null
