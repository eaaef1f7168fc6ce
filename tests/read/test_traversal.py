"""Chunk names from index.json never reach a file outside the dataset or cache directory, on any read path.

Each hostile index names a chunk outside the dataset whose bytes are a VALID chunk: if any read path
followed the name, it would read samples instead of raising. An audit hook records every file opened
while the dataset is read, and no path outside the dataset and cache directories may appear.
"""

from __future__ import annotations

import json
import shutil
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from obstore.store import MemoryStore

from dataset_files import data_files
from hostile import opened_files, outside, write_dataset
from litstream import (
    CombinedStreamingDataset,
    ConfigurationError,
    FormatError,
    LocalFileStore,
    ObstoreStore,
    StreamingDataset,
    astream,
)
from litstream.storage._transfer import Downloader

if TYPE_CHECKING:
    from pathlib import Path

HOSTILE_NAMES = [
    "../outside.bin",
    "sub/../../outside.bin",
    "{abs}",
    "..\\outside.bin",
    "C:/outside.bin",
    ".locks/chunk-0-0.bin",
    ".chunk-0-0.bin.tmp.1.abcd",
    "index.json",
    "0.index.json",
    "./chunk-0-0.bin",
    "a//chunk-0-0.bin",
    "chunk\x00.bin",
    "",
]


def _hostile(tmp_path: Path, name: str) -> tuple[Path, Path]:
    """A dataset whose first chunk is named ``name``; a valid copy of that chunk lies outside the dataset."""
    ds = tmp_path / "ds"
    obj = write_dataset(ds, [{"i": i} for i in range(6)], chunk_size=3)
    target = tmp_path / "outside.bin"
    shutil.copyfile(ds / "chunk-0-0.bin", target)
    obj["chunks"][0]["filename"] = name.format(abs=str(target))
    (ds / "index.json").write_text(json.dumps(obj))
    return ds, target


def _read_all(ds: StreamingDataset) -> list[Any]:
    return list(ds)


async def _astream_plain(ds: Path | ObstoreStore) -> list[Any]:
    return [s async for s in astream(ds)]


async def _astream_with(ds: Path) -> list[Any]:
    async with astream(ds) as samples:
        return [s async for s in samples]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
@pytest.mark.parametrize("path", ["iterate", "getitem", "astream", "astream_with", "combined"])
def test_local_read_paths_refuse_names_outside_the_dataset(tmp_path: Path, name: str, path: str) -> None:
    ds, target = _hostile(tmp_path, name)
    cache = tmp_path / "cache"
    with opened_files() as opened, pytest.raises(FormatError, match=r"chunks\[0\]\.filename"):
        if path == "iterate":
            _read_all(StreamingDataset(ds, cache_dir=cache))
        elif path == "getitem":
            StreamingDataset(ds, cache_dir=cache)[0]
        elif path == "astream":
            anyio.run(_astream_plain, ds)
        elif path == "astream_with":
            anyio.run(_astream_with, ds, backend="trio")
        else:
            list(CombinedStreamingDataset([StreamingDataset(ds)]))
    assert outside(opened, ds, cache) == []
    assert str(target) not in opened


def _memory_dataset(tmp_path: Path, name: str) -> ObstoreStore:
    ds, target = _hostile(tmp_path, name)
    memory = MemoryStore()
    for file in data_files(ds):
        memory.put(file.name, file.read_bytes())
    memory.put("outside.bin", target.read_bytes())  # a valid chunk beside the dataset's prefix
    return ObstoreStore(memory, url="mem://bucket/ds")  # not memory://: read through the chunk cache


@pytest.mark.usefixtures("obstore_in_process")
@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_remote_read_paths_refuse_names_outside_the_dataset(tmp_path: Path, name: str) -> None:
    store = _memory_dataset(tmp_path, name)
    cache = tmp_path / "cache"
    with opened_files() as opened:
        with pytest.raises(FormatError, match=r"chunks\[0\]\.filename"):
            list(StreamingDataset(store, cache_dir=cache))
        with pytest.raises(FormatError, match=r"chunks\[0\]\.filename"):
            StreamingDataset(store, cache_dir=cache)[1]
        with pytest.raises(FormatError, match=r"chunks\[0\]\.filename"):
            anyio.run(_astream_plain, store)
    assert outside(opened, tmp_path / "ds", cache) == []


@pytest.mark.anyio
async def test_a_valid_dataset_still_reads_through_the_same_paths(tmp_path: Path) -> None:
    ds = tmp_path / "ds"
    write_dataset(ds, [{"i": i} for i in range(6)], chunk_size=3)
    with opened_files() as opened:
        assert [s["i"] for s in StreamingDataset(ds)] == list(range(6))
        assert StreamingDataset(ds)[4] == {"i": 4}
        assert [s["i"] async for s in astream(ds)] == list(range(6))
    assert str(ds / "chunk-0-1.bin") in opened
    assert outside(opened, ds) == []


@pytest.mark.anyio
@pytest.mark.parametrize("key", ["../x", "/etc/passwd", "a/../../x", "a\\b", "", "a//b", "./a", "x\x00"])
async def test_local_store_keeps_every_key_inside_its_root(tmp_path: Path, key: str) -> None:
    (tmp_path / "x").write_bytes(b"secret")
    store = LocalFileStore(tmp_path / "root")
    for call in (
        lambda: store.get(key),
        lambda: store.get_range(key, 0, 4),
        lambda: store.get_span_at(key, 0),
        lambda: store.head(key),
        lambda: store.put(key, b"data"),
        lambda: store.delete(key),
    ):
        with pytest.raises(ConfigurationError, match="object key"):
            await call()
    assert (tmp_path / "x").read_bytes() == b"secret"


@pytest.mark.anyio
@pytest.mark.usefixtures("obstore_in_process")
@pytest.mark.parametrize("key", ["../x", "/x", "a/../../x", ".", "a\\b"])
async def test_object_store_and_downloader_refuse_keys_outside_the_prefix(tmp_path: Path, key: str) -> None:
    store = ObstoreStore(MemoryStore(), url="mem://b")
    with pytest.raises(ConfigurationError, match="object key"):
        await store.get(key)
    with pytest.raises(ConfigurationError, match="object key"):
        await store.put(key, b"x")
    with pytest.raises(ConfigurationError, match="object key"):
        await Downloader(store, tmp_path / "cache").fetch(key, size=1)
    assert await anyio.Path(tmp_path).exists()
    assert [p async for p in anyio.Path(tmp_path).iterdir()] == []  # nothing written, not even the cache dir
