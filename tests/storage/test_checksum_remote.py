"""Checksums on an S3 dataset (SeaweedFS): a chunk whose bytes changed on the server is refused on download."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from storage_backends import unique

from litstream import FormatError, StreamingDataset, astream, optimize
from litstream.format._checksum import CHECKSUM_KEY
from litstream.storage._resolver import store_for

if TYPE_CHECKING:
    from pathlib import Path

    from servers import S3Server

N = 30


def sample(i: int) -> dict[str, Any]:
    return {"i": i, "text": f"remote sample {i}"}


@pytest.mark.slow
@pytest.mark.parametrize("compression", [None, "zstd"])
def test_flipped_byte_on_s3_is_detected(s3_server: S3Server, tmp_path: Path, compression: str | None) -> None:
    url = f"s3://{s3_server.bucket}/{unique()}"
    options = s3_server.options()
    optimize(
        fn=sample,
        inputs=range(N),
        output_dir=url,
        chunk_size=10,
        num_workers=1,
        verbose=False,
        compression=compression,
        storage_options=options,
        checksum="sha256",
    )
    store = store_for(url, options)

    async def flip() -> str:
        index = json.loads(await store.get("index.json"))
        assert all(entry[CHECKSUM_KEY].startswith("sha256:") for entry in index["chunks"])
        name = str(index["chunks"][1]["filename"])
        data = bytearray(await store.get(name))
        data[-2] ^= 0x10
        await store.put(name, bytes(data))
        return name

    async def collect() -> list[int]:
        async with astream(url, storage_options=options) as samples:
            return [s["i"] async for s in samples]

    assert anyio.run(collect) == list(range(N))  # intact: every chunk passes
    name = anyio.run(flip)
    with pytest.raises(FormatError, match=rf"chunk {name} .* is corrupt: its sha256 is"):
        list(StreamingDataset(url, storage_options=options, cache_dir=tmp_path / "cache"))
    with pytest.raises(FormatError, match=rf"chunk {name} .* is corrupt"):
        anyio.run(collect)
