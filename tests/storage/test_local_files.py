"""The local-files capability (``storage/_files.py``): a user's wrapper store over a directory keeps the fast paths.

A wrapper that forwards ``local_path`` gets its chunks memory-mapped (no ``get``, no copy), ``ds[i]`` in one
thread call, and ``index.json`` read without an event loop; one that does not forward it still reads equal
data, through ``get``. Every test counts the calls the wrapper saw, so the path taken is checked, not timed.
"""

from __future__ import annotations

import mmap
from collections import Counter
from typing import TYPE_CHECKING

import pytest

from hostile import write_dataset
from litstream import ConfigurationError, LocalFileStore, StreamingDataLoader, StreamingDataset, astream
from litstream.read.source._source import DatasetSource
from litstream.storage._files import LocalFiles, local_path, map_object, remove_empty_folder, remove_stale_temporaries
from litstream.storage._hedged import HedgedStore

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from litstream import ObjectMeta
    from litstream.storage._base import PutData

SAMPLES = [{"i": i, "text": f"sample {i}" * (i % 4)} for i in range(20)]
READS = ("get", "get_range", "get_ranges")


class Wrapper:
    """A user's store: the Store protocol, every call delegated to a LocalFileStore and counted."""

    def __init__(self, inner: LocalFileStore) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()

    @property
    def url(self) -> str:
        return self.inner.url

    async def get(self, path: str) -> bytes:
        self.calls["get"] += 1
        return await self.inner.get(path)

    async def get_range(self, path: str, start: int, length: int) -> bytes:
        self.calls["get_range"] += 1
        return await self.inner.get_range(path, start, length)

    async def get_ranges(self, path: str, starts: Sequence[int], lengths: Sequence[int]) -> list[bytes]:
        self.calls["get_ranges"] += 1
        return await self.inner.get_ranges(path, starts, lengths)

    async def put(self, path: str, data: PutData) -> None:
        await self.inner.put(path, data)

    async def head(self, path: str) -> ObjectMeta:
        return await self.inner.head(path)

    async def list(self, prefix: str = "") -> list[ObjectMeta]:
        self.calls["list"] += 1
        return await self.inner.list(prefix)

    async def delete(self, path: str) -> None:
        await self.inner.delete(path)


class LocalWrapper(Wrapper):
    """The same wrapper, forwarding the local-files capability."""

    def local_path(self, key: str) -> Path | None:
        self.calls["local_path"] += 1
        return self.inner.local_path(key)


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    root = tmp_path / "ds"
    write_dataset(root, SAMPLES, chunk_size=6)
    return root


def test_the_capability_is_a_protocol_that_plain_wrappers_lack(dataset: Path) -> None:
    store = LocalFileStore(dataset)
    assert isinstance(store, LocalFiles)
    assert isinstance(LocalWrapper(store), LocalFiles)
    assert not isinstance(Wrapper(store), LocalFiles)
    assert local_path(store, "") == dataset
    assert local_path(store, "chunk-0-0.bin") == dataset / "chunk-0-0.bin"
    assert local_path(Wrapper(store), "chunk-0-0.bin") is None
    assert local_path(HedgedStore(store, 1.0), "index.json") == dataset / "index.json"  # forwarded
    with pytest.raises(ConfigurationError, match="object key"):
        local_path(store, "../outside")


def test_a_forwarding_wrapper_keeps_the_mmap_path_for_iteration_and_the_loader(dataset: Path) -> None:
    store = LocalWrapper(LocalFileStore(dataset))
    assert list(StreamingDataset(store)) == SAMPLES
    batches = list(StreamingDataLoader(StreamingDataset(store), batch_size=5, num_workers=0))
    assert [int(i) for batch in batches for i in batch["i"]] == list(range(20))
    assert sum(store.calls[name] for name in READS) == 0  # index and chunks: mapped or read as local files
    assert store.calls["local_path"] > 0


def test_a_forwarding_wrapper_keeps_the_synchronous_index_path(dataset: Path) -> None:
    store = LocalWrapper(LocalFileStore(dataset))
    ds = StreamingDataset(store)
    assert [ds[i] for i in range(len(ds))] == SAMPLES
    assert sum(store.calls[name] for name in READS) == 0  # one thread call per item, no range reads


@pytest.mark.anyio
async def test_chunks_of_a_forwarding_wrapper_are_mapped_not_copied(dataset: Path) -> None:
    store = LocalWrapper(LocalFileStore(dataset))
    source = await DatasetSource.open(store)
    view = await source.read_chunk(0)
    assert isinstance(view.data, mmap.mmap)  # the file itself, no copy
    assert [source.decode_in(view, k) for k in range(view.num_items)] == SAMPLES[:6]
    mapped = source.map_local_chunk(1)
    assert mapped is not None
    assert isinstance(mapped.data, mmap.mmap)
    assert [s async for s in astream(store)] == SAMPLES
    assert sum(store.calls[name] for name in READS) == 0


@pytest.mark.anyio
async def test_a_plain_wrapper_reads_equal_data_through_get(dataset: Path) -> None:
    store = Wrapper(LocalFileStore(dataset))
    source = await DatasetSource.open(store)
    view = await source.read_chunk(0)
    assert not isinstance(view.data, mmap.mmap)  # bytes copied out of get
    assert source.map_local_chunk(0) is None
    assert [s async for s in astream(store)] == SAMPLES
    assert store.calls["get"] > 0


def test_sync_forms_over_a_plain_wrapper_read_equal_data(dataset: Path) -> None:
    store = Wrapper(LocalFileStore(dataset))
    ds = StreamingDataset(store)
    assert list(ds) == SAMPLES
    assert ds[7] == SAMPLES[7]
    assert store.calls["get"] > 0
    assert store.calls["get_range"] > 0


def test_map_object_maps_errors_and_housekeeping_goes_through_the_capability(dataset: Path) -> None:
    from litstream import ObjectNotFoundError

    store = LocalWrapper(LocalFileStore(dataset))
    assert map_object(Wrapper(LocalFileStore(dataset)), "chunk-0-0.bin") is None
    with pytest.raises(ObjectNotFoundError, match=r"missing\.bin does not exist") as info:
        map_object(store, "missing.bin")
    assert isinstance(info.value.__cause__, FileNotFoundError)
    stale = dataset / "sub" / ".chunk-0-0.bin.tmp.1.abcd"
    stale.parent.mkdir()
    stale.write_bytes(b"half")
    (dataset / ".index.json.tmp.2.ef01").write_bytes(b"half")
    remove_stale_temporaries(store, ("", "sub"))
    assert not stale.exists()
    assert not (dataset / ".index.json.tmp.2.ef01").exists()
    remove_empty_folder(store, "sub")
    assert not (dataset / "sub").exists()
    remove_empty_folder(store, "chunk-0-0.bin")  # not a directory: left alone, no error
    assert (dataset / "chunk-0-0.bin").is_file()
