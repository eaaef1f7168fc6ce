"""Default checksums on a remote dataset (S3 through SeaweedFS): a corrupt cached copy is dropped and downloaded
again, a corrupt object on the server raises ``ChecksumError`` naming the chunk and leaves no copy behind, on every
read path (whole chunks, chunks decoded while they download, ``astream`` on asyncio and trio).

A chunk whose bytes go wrong in transit once is a fault a real server cannot produce on demand: that case uses the
scripted in-memory store of ``test_transfer.py``, injected as the dataset's store.
"""

from __future__ import annotations

import json
import uuid
from functools import partial
from typing import TYPE_CHECKING, Any

import anyio
import numpy as np
import pytest
from test_transfer import ScriptedStore

from litstream import ChecksumError, StreamingDataset, astream, optimize
from litstream.format._checksum import CHECKSUM_KEY
from litstream.storage._resolver import store_for

if TYPE_CHECKING:
    from pathlib import Path

    from servers import S3Server

N = 30


def sample(i: int) -> dict[str, Any]:
    return {"i": i, "text": f"remote sample {i}"}


def _big(i: int) -> dict[str, Any]:
    return {"x": np.full(4000, i % 251, dtype=np.uint8), "i": i}


def _write(s3_server: S3Server, fn: Any = sample, n: int = N, **kwargs: Any) -> tuple[str, list[dict[str, Any]]]:
    url = f"s3://{s3_server.bucket}/checksum-{uuid.uuid4().hex[:10]}"
    options = s3_server.options()
    optimize(fn=fn, inputs=range(n), output_dir=url, num_workers=1, verbose=False, storage_options=options, **kwargs)
    index = json.loads(anyio.run(store_for(url, options).get, "index.json"))
    chunks = list(index["chunks"])
    assert all(e[CHECKSUM_KEY].startswith("xxh3:") for e in chunks)  # the default
    return url, chunks


def _cached(cache: Path, name: str) -> list[Path]:
    return [p for p in cache.rglob(name) if ".locks" not in p.parts]


def _flip_last_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1] ^= 0x01
    path.write_bytes(bytes(data))


async def _flip_on_server(url: str, options: dict[str, Any], name: str) -> None:
    store = store_for(url, options)
    data = bytearray(await store.get(name))
    data[-1] ^= 0x01
    await store.put(name, bytes(data))


def _read(url: str, options: dict[str, Any], cache: Path) -> list[Any]:
    return list(StreamingDataset(url, storage_options=options, cache_dir=str(cache)))


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_a_corrupt_cached_s3_chunk_is_fetched_again(
    s3_server: S3Server, tmp_path: Path, compression: str | None
) -> None:
    url, chunks = _write(s3_server, chunk_size=10, compression=compression)
    options, cache = s3_server.options(), tmp_path / "cache"
    assert sorted(s["i"] for s in _read(url, options, cache)) == list(range(N))
    name = chunks[1]["filename"]
    (copy,) = _cached(cache, name)
    good = copy.read_bytes()
    _flip_last_byte(copy)
    samples = _read(url, options, cache)  # a new dataset object: the copy is checked, dropped and downloaded
    assert sorted(samples, key=lambda s: s["i"]) == [sample(i) for i in range(N)]
    (copy,) = _cached(cache, name)
    assert copy.read_bytes() == good


def test_a_corrupt_s3_object_raises_naming_the_chunk_and_leaves_no_copy(s3_server: S3Server, tmp_path: Path) -> None:
    url, chunks = _write(s3_server, chunk_size=10)
    options, cache = s3_server.options(), tmp_path / "cache"
    name = chunks[2]["filename"]
    anyio.run(_flip_on_server, url, options, name)
    with pytest.raises(ChecksumError, match=rf"chunk {name} .* is corrupt: its xxh3 is .*fresh download from s3://"):
        _read(url, options, cache)
    assert _cached(cache, name) == []


@pytest.mark.anyio
async def test_astream_of_a_corrupt_s3_object_raises_naming_it(s3_server: S3Server) -> None:
    url, chunks = await anyio.to_thread.run_sync(partial(_write, s3_server, chunk_size=10))
    options = s3_server.options()
    name = chunks[1]["filename"]
    await _flip_on_server(url, options, name)
    seen: list[int] = []
    with pytest.raises(ChecksumError, match=rf"chunk {name} \(s3://.*{name}\) is corrupt"):
        async with astream(url, storage_options=options) as samples:
            seen.extend([s["i"] async for s in samples])
    assert not [i for i in seen if 10 <= i < 20]  # nothing of the corrupt chunk was served


PIECE = 64 * 1024


def test_streamed_chunks_are_checked_too(s3_server: S3Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks larger than a ranged GET are decoded while they download (checked when the download ends); a cached
    copy is checked before it is decoded."""
    url, chunks = _write(s3_server, fn=_big, n=600, chunk_bytes="1MB")
    assert len(chunks) >= 2
    monkeypatch.setenv("LITSTREAM_DOWNLOAD_PIECE_SIZE", str(PIECE))  # the downloader's settings
    options, cache = s3_server.options(), tmp_path / "cache"
    assert sorted(s["i"] for s in _read(url, options, cache)) == list(range(600))
    name = chunks[0]["filename"]
    (copy,) = _cached(cache, name)
    good = copy.read_bytes()
    _flip_last_byte(copy)
    assert sorted(s["i"] for s in _read(url, options, cache)) == list(range(600))
    (copy,) = _cached(cache, name)
    assert copy.read_bytes() == good
    # a corrupt object on the server, downloaded (and decoded) in pieces: raised when its download ends
    name = chunks[1]["filename"]
    anyio.run(_flip_on_server, url, options, name)
    with pytest.raises(ChecksumError, match=rf"chunk {name} .* is corrupt: .*decoded while it downloaded"):
        _read(url, options, tmp_path / "cold")
    assert _cached(tmp_path / "cold", name) == []


def _local_dataset(out: Path) -> dict[str, bytes]:
    optimize(fn=sample, inputs=range(N), output_dir=str(out), chunk_size=10, num_workers=1, verbose=False)
    return {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}


class FlipOnce(ScriptedStore):
    """Serves chunk ``name`` with one flipped byte on its first whole read (a transfer gone wrong once)."""

    def __init__(self, objects: dict[str, bytes], name: str) -> None:
        super().__init__(objects)
        self.name = name

    async def get(self, path: str) -> bytes:
        data = await super().get(path)
        if path == self.name and self.count("get", path) == 1:
            return data[:-1] + bytes([data[-1] ^ 0x01])
        return data


@pytest.mark.anyio
async def test_a_chunk_read_into_memory_is_read_again_once_if_it_does_not_match(tmp_path: Path) -> None:
    objects = await anyio.to_thread.run_sync(_local_dataset, tmp_path)
    name = json.loads(objects["index.json"])["chunks"][1]["filename"]
    store = FlipOnce(objects, name)
    async with astream(store) as samples:
        got = [s async for s in samples]
    assert sorted(got, key=lambda s: s["i"]) == [sample(i) for i in range(N)]
    assert store.count("get", name) == 2
    store.objects[name] = objects[name][:-1] + bytes([objects[name][-1] ^ 0x01])  # now corrupt for good
    with pytest.raises(ChecksumError, match=rf"chunk {name} \(scripted://.*{name}\) is corrupt"):
        async with astream(store) as samples:
            [s async for s in samples]
