"""merge_datasets, subsample, train_test_split and subset against the real LitData.

* LitData reads a dataset merged by litstream (compressed or not) sample for sample as litstream does.
* litstream reads a dataset merged by LitData.
* subsample=, train_test_split and subset() select the same items as LitData's and, with
  ``shuffle=True``, serve them in the same order (``LITDATA_POSIX_FAST=0`` keeps LitData on
  FullShuffle on a local disk).

LitData's reader writes into a local dataset directory (it decompresses next to the chunks and deletes
the compressed files), so it always reads its own copy.
"""

from __future__ import annotations

import gc
import shutil
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

import litstream
from peer import litdata_marks, require_peer

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

litdata = require_peer("litdata")
from litdata.utilities.train_test_split import train_test_split as litdata_split  # noqa: E402

pytestmark = litdata_marks(r"ignore:unclosed file <_io\.FileIO name='[^']*-litdata-copy\d*/:ResourceWarning")


def _sample(i: int) -> dict[str, Any]:
    return {"i": i, "name": f"item-{i}", "x": np.arange(i, i + 4, dtype=np.int64)}


def _identity(i: int) -> int:
    return i


def _other(i: int) -> dict[str, Any]:
    return _sample(1000 + i)


_copies = 0


def _copy(directory: Path) -> str:
    global _copies
    _copies += 1
    target = directory.parent / f"{directory.name}-litdata-copy{_copies}"
    shutil.copytree(directory, target)
    return str(target)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    return bool(type(a) is type(b) and a == b)


def _litdata_list(ds: Any) -> list[Any]:
    samples = list(ds)
    gc.collect()  # LitData's leaked chunk handles are closed here, inside this test
    return samples


@pytest.fixture(autouse=True)
def _collect_litdata_handles() -> Iterator[None]:
    """LitData keeps datasets alive in method caches (``functools.lru_cache`` on its shufflers and item
    loaders) with their chunk files open: drop them while this test's warning filter applies."""
    yield
    from litdata.streaming import item_loader, shuffle

    for module in (shuffle, item_loader):
        for cls in vars(module).values():
            if isinstance(cls, type) and cls.__module__ == module.__name__:
                for attr in vars(cls).values():
                    if hasattr(attr, "cache_clear"):
                        attr.cache_clear()
    gc.collect()


@pytest.fixture
def posix_fast_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITDATA_POSIX_FAST", "0")


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_litdata_reads_a_litstream_merge(tmp_path: Path, compression: str | None) -> None:
    a, b, out = tmp_path / "a", tmp_path / "b", tmp_path / "out"
    litstream.optimize(_sample, list(range(11)), a, chunk_size=4, compression=compression, num_workers=2, verbose=False)
    litstream.optimize(_other, list(range(6)), b, chunk_size=4, compression=compression, num_workers=1, verbose=False)
    litstream.merge_datasets([a, b], out)
    ours = list(litstream.StreamingDataset(out))
    assert [s["i"] for s in ours] == [*range(11), *range(1000, 1006)]
    theirs = _litdata_list(litdata.StreamingDataset(_copy(out)))
    assert len(theirs) == len(ours) == 17
    for k, (mine, peer) in enumerate(zip(ours, theirs, strict=True)):
        assert _same(mine, peer), f"sample {k}: {mine!r} != {peer!r}"
    peer_ds = litdata.StreamingDataset(_copy(out))
    assert _same(peer_ds[12], ours[12])
    del peer_ds
    gc.collect()


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_litstream_reads_a_litdata_merge(tmp_path: Path, compression: str | None) -> None:
    a, b, out = tmp_path / "a", tmp_path / "b", tmp_path / "out"
    litstream.optimize(_sample, list(range(7)), a, chunk_size=3, compression=compression, num_workers=1, verbose=False)
    litstream.optimize(_other, list(range(5)), b, chunk_size=3, compression=compression, num_workers=1, verbose=False)
    litdata.merge_datasets([str(a), str(b)], str(out), max_workers=2)
    ours = litstream.StreamingDataset(out)
    expected = [_sample(i) for i in range(7)] + [_other(i) for i in range(5)]
    got = ours[:]
    assert len(got) == 12
    assert all(_same(g, e) for g, e in zip(got, expected, strict=True))


# -------------------------------------------------------------------------------- selections


@pytest.fixture(scope="module")
def ints(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("ints") / "data"
    litstream.optimize(_identity, list(range(100)), d, chunk_size=7, num_workers=1, verbose=False)
    return d


def _ints(values: Any) -> list[int]:
    return [int(v) for v in values]


@pytest.mark.usefixtures("posix_fast_off")
@pytest.mark.parametrize(("fraction", "shuffle"), [(0.5, False), (0.37, True), (1.5, True), (2.3, True)])
def test_subsample_serves_what_litdata_serves(ints: Path, fraction: float, shuffle: bool) -> None:
    theirs = _ints(_litdata_list(litdata.StreamingDataset(_copy(ints), subsample=fraction, shuffle=shuffle)))
    ours = _ints(litstream.StreamingDataset(ints, subsample=fraction, shuffle=shuffle))
    assert ours == theirs
    assert len(ours) == {0.5: 50, 0.37: 37, 1.5: 150, 2.3: 229}[fraction]


@pytest.mark.usefixtures("posix_fast_off")
@pytest.mark.parametrize("split_shuffle", [False, True])
@pytest.mark.parametrize("splits", [[0.1, 0.2, 0.7], [0.3, 0.25]])
def test_train_test_split_matches_litdata(ints: Path, splits: list[float], split_shuffle: bool) -> None:
    theirs = litdata_split(litdata.StreamingDataset(_copy(ints), shuffle=True), splits, seed=7, shuffle=split_shuffle)
    ours = litstream.train_test_split(
        litstream.StreamingDataset(ints, shuffle=True), splits, seed=7, shuffle=split_shuffle
    )
    assert [len(p) for p in ours] == [len(p) for p in theirs] == [int(100 * f) for f in splits]
    for mine, peer in zip(ours, theirs, strict=True):
        assert mine[:] == _ints(peer[:])  # random access: the part's own order
        assert _ints(mine) == _ints(_litdata_list(peer))  # iteration: FullShuffle over the part's chunks


@pytest.mark.usefixtures("posix_fast_off")
@pytest.mark.parametrize("shuffle", [False, True])
def test_subset_matches_litdata(ints: Path, shuffle: bool) -> None:
    indices = [5, 1, 2, 3, *range(40, 75), 99]
    theirs = litdata.StreamingDataset(_copy(ints), shuffle=shuffle).subset(indices)
    ours = litstream.StreamingDataset(ints, shuffle=shuffle).subset(indices)
    assert ours[:] == _ints(theirs[:]) == indices
    assert _ints(ours) == _ints(_litdata_list(theirs))
