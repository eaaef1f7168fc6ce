"""``litstream.Cache`` against LitData 0.2.76's ``litdata.streaming.Cache``, both directions.

Each case writes the same samples, assigned in the same (partly out-of-order) index order, with both
``Cache`` classes, then: the files and chunk boundaries agree, each side reads the other's dataset
through ``Cache`` and through ``StreamingDataset``, and encrypted datasets read with the other side's
key file.
"""

from __future__ import annotations

import json
import os
import shutil
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

import litstream
from clean_process import run_clean
from dataset_files import without_version_log
from litstream import ConfigurationError, DatasetNotFoundError, FernetEncryption
from peer import litdata_marks, require_peer

if TYPE_CHECKING:
    from pathlib import Path

litdata = require_peer("litdata")
from litdata.utilities.encryption import FernetEncryption as LitFernet  # noqa: E402

pytestmark = litdata_marks(r"ignore:unclosed file <_io\.FileIO:ResourceWarning")

N = 23
# Sampler-like order: index 1 before 0, and a late 7 (waits until 6 arrived).
ORDER = [1, 0, 2, 3, 4, 5, 8, 9, 6, 7, *range(10, N)]


def sample(i: int) -> dict[str, Any]:
    return {"x": np.arange(i % 5 + 1, dtype=np.int64) * i, "name": f"item-{i}", "b": b"\x00" * (i % 7)}


def check(got: Any, i: int) -> None:
    want = sample(i)
    np.testing.assert_array_equal(np.asarray(got["x"]), want["x"])
    assert got["name"] == want["name"]
    assert bytes(got["b"]) == want["b"]


CHUNKING = [{"chunk_size": 4}, {"chunk_bytes": 300}]
COMPRESSION = [{}, {"compression": "zstd"}, {"compression": "zstd", "compression_level": "chunk"}]


def write(cache: Any) -> list[str]:
    for i in ORDER:
        cache[i] = sample(i)
    written = cache.done()
    cache.merge()
    return [str(p) for p in written]


def chunk_table(path: Path) -> list[tuple[str, int]]:
    index = json.loads((path / "index.json").read_text())
    return [(c["filename"], c["chunk_size"]) for c in index["chunks"]]


@pytest.mark.parametrize("chunking", CHUNKING, ids=["chunk_size", "chunk_bytes"])
@pytest.mark.parametrize("compression", COMPRESSION, ids=["raw", "zstd", "zstd-chunk"])
def test_both_caches_write_the_same_chunks_and_read_each_other(
    tmp_path: Path, chunking: dict[str, Any], compression: dict[str, Any]
) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    written = write(litstream.Cache(str(ours), **chunking, **compression))
    write(litdata.streaming.Cache(str(theirs), **chunking, **compression))

    assert chunk_table(ours) == chunk_table(theirs)
    assert sum(n for _, n in chunk_table(ours)) == N
    assert sorted(os.path.basename(p) for p in written) == sorted(name for name, _ in chunk_table(ours))
    # no partial index left on either side; ours also holds the version log of its commit
    assert sorted(without_version_log(os.listdir(ours))) == sorted(os.listdir(theirs))
    assert [v.number for v in litstream.list_versions(ours)] == [1]

    # LitData decompresses local chunks in place when it reads them: it reads copies.
    for path in (ours, theirs):  # each Cache reads both datasets
        copy = tmp_path / f"{path.name}-for-litdata"
        shutil.copytree(path, copy)
        # LitData's Cache needs a chunk size even to read; litstream's only to write.
        for cache in (litstream.Cache(str(path)), litdata.streaming.Cache(str(copy), chunk_size=1, **compression)):
            assert len(cache) == N
            for i in range(N):
                check(cache[i], i)
    for i, got in enumerate(litstream.StreamingDataset(str(theirs))):
        check(got, i)
    for i, got in enumerate(litdata.StreamingDataset(str(tmp_path / "ours-for-litdata"))):
        check(got, i)


@pytest.mark.parametrize("level", ["sample", "chunk"])
def test_encrypted_cache_both_ways(tmp_path: Path, level: str) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    ours_key = FernetEncryption("pw", level=level)
    write(litstream.Cache(str(ours), chunk_size=5, encryption=ours_key))
    ours_key.save(str(tmp_path / "ours.json"))
    theirs_key = LitFernet("pw", level=level)
    write(litdata.streaming.Cache(str(theirs), chunk_size=5, encryption=theirs_key))
    theirs_key.save(str(tmp_path / "theirs.json"))

    assert chunk_table(ours) == chunk_table(theirs)
    read_theirs = litstream.Cache(str(theirs), encryption=FernetEncryption.load(str(tmp_path / "theirs.json"), "pw"))
    read_ours = litdata.streaming.Cache(
        str(ours), chunk_size=1, encryption=LitFernet.load(str(tmp_path / "ours.json"), "pw")
    )
    for cache in (read_theirs, read_ours):
        assert len(cache) == N
        for i in range(N):
            check(cache[i], i)
    with pytest.raises(litstream.EncryptionError):
        litstream.Cache(str(theirs))[0]  # no key: refused, not garbage


# Worker 0 gets the even batches (indices 0..11), worker 1 the odd ones (12..22): each writer's indices
# are consecutive, as LitData's samplers give them (its BinaryWriter requires it).
BATCHES = [[0, 1, 2, 3], [12, 13, 14, 15], [4, 5, 6, 7], [16, 17, 18, 19], [8, 9, 10, 11], [20, 21, 22]]


class _WritingDataset:
    """A map-style dataset whose workers write each item they load into a shared Cache (LitData's pattern)."""

    def __init__(self, cache: Any) -> None:
        self.cache = cache

    def __len__(self) -> int:
        return N

    def __getitem__(self, i: int) -> int:
        self.cache[i] = sample(i)
        return i


def _write_with_two_forked_workers(path: str, cls: str) -> list[int]:
    """In a clean helper process (torch forks its workers from it, never from the threaded pytest worker)."""
    from torch.utils.data import DataLoader

    module = litstream if cls == "litstream" else litdata.streaming
    cache = module.Cache(path, chunk_size=3)
    loader: DataLoader[Any] = DataLoader(
        _WritingDataset(cache),  # type: ignore[arg-type]
        num_workers=2,
        batch_sampler=BATCHES,
        collate_fn=_done_after_last,
        multiprocessing_context="fork",
    )
    return sorted(i for batch in loader for i in batch)


@pytest.mark.parametrize("cls", ["litstream", "litdata"])
def test_two_dataloader_workers_write_one_dataset(tmp_path: Path, cls: str) -> None:
    seen = run_clean(_write_with_two_forked_workers, str(tmp_path), cls)
    assert seen == list(range(N))
    assert sorted(os.listdir(tmp_path)) == ["0.index.json", "1.index.json", *_chunk_names(tmp_path)]
    module = litstream if cls == "litstream" else litdata.streaming
    cache = module.Cache(str(tmp_path), chunk_size=3)
    cache.merge(num_workers=2)
    chunks = chunk_table(tmp_path)
    assert {name.split("-")[1] for name, _ in chunks} == {"0", "1"}  # both workers' ranks
    # Either side reads the merged dataset, every item once.
    for reader in (litstream.Cache(str(tmp_path)), litdata.streaming.Cache(str(tmp_path), chunk_size=1)):
        assert len(reader) == N
        assert sorted(reader[i]["name"] for i in range(N)) == sorted(sample(i)["name"] for i in range(N))


def _chunk_names(path: Path) -> list[str]:
    return sorted(n for n in os.listdir(path) if n.startswith("chunk-"))


def _done_after_last(batch: list[int]) -> list[int]:
    # The worker that loads the last index of its share closes its writer (LitData's samplers do this
    # at StopIteration).
    from torch.utils.data import get_worker_info

    info = get_worker_info()
    assert info is not None
    if batch[-1] in (11, N - 1):
        info.dataset.cache.done()  # type: ignore[attr-defined]  # the _WritingDataset of this module
    return batch


def test_cache_errors_name_the_problem(tmp_path: Path) -> None:
    cache = litstream.Cache(str(tmp_path), chunk_size=2)
    cache[0] = sample(0)
    with pytest.raises(ConfigurationError, match=r"cache\[0\] was assigned twice"):
        cache[0] = sample(0)
    with pytest.raises(ConfigurationError, match="index must be an int >= 0"):
        cache[-1] = sample(0)
    with pytest.raises(DatasetNotFoundError, match="call done\\(\\) and merge\\(\\)"):
        len(cache)
    with pytest.raises(ConfigurationError, match="chunk_size"):
        litstream.Cache(str(tmp_path / "x"))[0] = sample(0)
    with pytest.raises(ConfigurationError, match="needs a local directory"):
        litstream.Cache("s3://bucket/ds")
    with pytest.raises(ConfigurationError, match="subsampled_files"):
        litstream.Cache(str(tmp_path), subsampled_files=["chunk-0-0.bin"])
    assert cache.done() == [str(tmp_path / "chunk-0-0.bin")]
    cache.merge()
    assert cache.filled
    assert cache.cache_dir == str(tmp_path)
    assert cache.checkpoint_dir == str(tmp_path / "checkpoints")
    assert cache.done() == []  # the dataset is complete: nothing more to write


def test_cache_takes_litdatas_parameters_in_litdatas_order() -> None:
    import inspect

    def params(cls: type) -> list[tuple[str, str]]:
        sig = inspect.signature(cls.__init__)  # type: ignore[misc]  # the class's own, as declared
        return [(p.name, repr(p.default)) for p in sig.parameters.values() if p.name != "self"]

    assert params(litstream.Cache) == params(litdata.streaming.Cache)
    assert "Cache" in litdata.streaming.__all__
