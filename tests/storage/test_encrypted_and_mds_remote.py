"""Encrypted datasets and Mosaic MDS directories on a real S3 server (SeaweedFS): chunks go through
the download cache, where encrypted chunk files stay encrypted and compressed MDS shards are
decompressed in memory."""

from __future__ import annotations

import pickle
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import numpy as np
import pytest
from storage_backends import unique

from dataset_files import data_files
from litstream import EncryptionError, FernetEncryption, StreamingDataset, astream, optimize
from litstream.storage._resolver import store_for
from peer import require_installed

if TYPE_CHECKING:
    from servers import S3Server

MARKER = b"REMOTE-PLAINTEXT"


def _sample(i: int) -> dict[str, Any]:
    return {"i": i, "x": np.full(3, i, dtype=np.int16), "tag": MARKER + bytes([i])}


@pytest.mark.parametrize("level", ["sample", "chunk"])
def test_encrypted_dataset_on_s3(level: str, s3_server: S3Server, tmp_path: Path) -> None:
    url = f"s3://{s3_server.bucket}/{unique()}/enc"
    enc = FernetEncryption("pw", level=level)
    optimize(_sample, list(range(12)), url, chunk_size=5, num_workers=1, encryption=enc, verbose=False,
             storage_options=s3_server.options())  # fmt: skip
    cache = tmp_path / "cache"
    ds = StreamingDataset(url, encryption=enc, storage_options=s3_server.options(), cache_dir=cache)
    assert [s["i"] for s in ds] == list(range(12))
    assert bytes(ds[7]["tag"]) == MARKER + bytes([7])
    cached = [p for p in cache.rglob("chunk-*") if p.is_file()]
    assert cached, "chunks were expected in the cache"
    assert not any(MARKER in p.read_bytes() for p in cached)
    with pytest.raises(EncryptionError, match=f"{url} is encrypted"):
        StreamingDataset(url, storage_options=s3_server.options(), cache_dir=cache)[0]


def test_mds_directory_on_s3(s3_server: S3Server, tmp_path: Path) -> None:
    require_installed("streaming")  # mosaicml-streaming, the MDS test peer: required in CI
    local = tmp_path / "mds"
    samples = [{"id": i, "text": f"t{i}", "arr": np.arange(i + 1, dtype=np.float32)} for i in range(9)]
    job = {
        "out": str(local),
        "columns": {"id": "int", "text": "str", "arr": "ndarray"},
        "compression": "zstd",
        "size_limit": 200,
        "samples": samples,
    }
    script = Path(__file__).parents[1] / "compat" / "mds_writer.py"
    done = subprocess.run([sys.executable, str(script)], input=pickle.dumps(job), capture_output=True, timeout=240)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    url = f"s3://{s3_server.bucket}/{unique()}/mds"
    store = store_for(url, s3_server.options())

    async def upload() -> None:
        for path in data_files(local):
            await store.put(path.name, path.read_bytes())

    anyio.run(upload)
    assert len(list(local.glob("*.mds.zstd"))) > 1
    ds = StreamingDataset(url, storage_options=s3_server.options(), cache_dir=tmp_path / "cache")
    got = list(ds)
    assert [s["id"] for s in got] == list(range(9))
    for s in got:
        np.testing.assert_array_equal(s["arr"], np.arange(s["id"] + 1, dtype=np.float32))
        assert s["text"] == f"t{s['id']}"
    assert ds[8]["text"] == "t8"

    async def stream() -> list[int]:
        return [s["id"] async for s in astream(url, storage_options=s3_server.options())]

    assert anyio.run(stream) == list(range(9))
