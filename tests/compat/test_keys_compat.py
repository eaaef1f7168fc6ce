"""Keyed datasets against the real LitData 0.2.76, both ways.

* LitData writes with ``key_fn`` → litstream's ``ds[key]`` equals LitData's ``get_by_key`` for every key.
* litstream writes with ``key_fn`` (several workers, and a 3-shard ``build_keys_index``) → LitData's lookup
  equals litstream's for every key.
* ``dataset_update`` by either library is seen by the other.

Samples carry a numpy leaf so LitData keeps its classic chunk layout (scalar-only dicts become Arrow IPC).
"""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

import litstream
from peer import litdata_marks, require_peer

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

litdata = require_peer("litdata")

# LitData's own readers (build_keys_index, dataset_update) leave chunk files of its datasets open.
pytestmark = litdata_marks(
    r"ignore:unclosed file <_io\.FileIO name='[^']*/ld/:ResourceWarning",
    r"ignore:Exception ignored in. <_io\.FileIO name='[^']*/ld/:pytest.PytestUnraisableExceptionWarning",
)

N = 23


def _sample(i: int) -> dict[str, Any]:
    return {"id": f"item-{i}", "x": np.arange(i, i + 4, dtype=np.int64)}


def _key(s: dict[str, Any]) -> str:
    return str(s["id"])


def _int_key(s: dict[str, Any]) -> int:
    return int(s["x"][0]) * 7


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return bool(a["id"] == b["id"] and np.array_equal(np.asarray(a["x"]), np.asarray(b["x"])))


@pytest.fixture(autouse=True)
def _collect_litdata_handles() -> Iterator[None]:
    yield
    gc.collect()


def test_litstream_reads_litdatas_keys(tmp_path: Path) -> None:
    out = tmp_path / "ld"
    litdata.optimize(_sample, list(range(N)), str(out), chunk_size=4, num_workers=2, key_fn=_key)
    theirs = litdata.StreamingDataset(str(out))
    ours = litstream.StreamingDataset(out)
    for i in range(N):
        key = f"item-{i}"
        assert _same(ours[key], theirs.get_by_key(key))
        assert _same(ours[key], _sample(i))


def test_litdata_reads_litstreams_keys(tmp_path: Path) -> None:
    out = tmp_path / "ls"
    litstream.optimize(_sample, list(range(N)), out, chunk_size=4, num_workers=3, key_fn=_key, verbose=False)
    theirs = litdata.StreamingDataset(str(out))
    ours = litstream.StreamingDataset(out)
    for i in range(N):
        key = f"item-{i}"
        assert _same(theirs.get_by_key(key), ours[key])
        assert _same(theirs[key], _sample(i))


def test_sharded_int_keys_route_the_same_way(tmp_path: Path) -> None:
    out = tmp_path / "ls"
    litstream.optimize(_sample, list(range(N)), out, chunk_size=4, num_workers=2, verbose=False)
    litstream.build_keys_index(str(out), _int_key, num_shards=3, verbose=False)
    theirs = litdata.StreamingDataset(str(out))
    ours = litstream.StreamingDataset(out)
    for i in range(N):
        assert _same(theirs.get_by_key(i * 7), ours.get_by_key(i * 7))
        assert _same(ours.get_by_key(i * 7), _sample(i))
    other = tmp_path / "ld"
    litdata.optimize(_sample, list(range(N)), str(other), chunk_size=4, num_workers=1)
    litdata.build_keys_index(str(other), _int_key, num_shards=3, verbose=False)
    mine = litstream.StreamingDataset(other)
    for i in range(N):
        assert _same(mine.get_by_key(i * 7), _sample(i))


def test_litdata_sees_a_litstream_update(tmp_path: Path) -> None:
    out = tmp_path / "ls"
    litstream.optimize(_sample, list(range(N)), out, chunk_size=4, num_workers=2, key_fn=_key, verbose=False)
    new = {"id": "item-5", "x": np.array([-1, -2, -3, -4], dtype=np.int64)}
    litstream.dataset_update(str(out), {"item-5": new})
    theirs = litdata.StreamingDataset(str(out))
    assert _same(theirs.get_by_key("item-5"), new)
    assert _same(theirs.get_by_key("item-6"), _sample(6))
    assert [s["id"] for s in theirs] == [s["id"] for s in litstream.StreamingDataset(out)]


def test_litstream_sees_a_litdata_update(tmp_path: Path) -> None:
    out = tmp_path / "ld"
    litdata.optimize(_sample, list(range(N)), str(out), chunk_size=4, num_workers=1, key_fn=_key)
    new = {"id": "item-9", "x": np.array([5, 5, 5, 5], dtype=np.int64)}
    with litdata.dataset_update(str(out)) as update:
        update["item-9"] = new
        update.commit()
    ours = litstream.StreamingDataset(out)
    assert _same(ours["item-9"], new)
    assert _same(ours["item-10"], _sample(10))
    assert len(list(ours)) == N


def test_appended_and_merged_keys_agree(tmp_path: Path) -> None:
    ls_out = tmp_path / "ls"
    litstream.optimize(_sample, list(range(9)), ls_out, chunk_size=4, num_workers=2, key_fn=_key, verbose=False)
    litstream.optimize(
        _sample, list(range(9, N)), ls_out, chunk_size=4, num_workers=2, key_fn=_key, mode="append", verbose=False
    )
    merged = tmp_path / "merged"
    other = tmp_path / "other"
    litstream.optimize(_sample, list(range(N, N + 5)), other, chunk_size=4, num_workers=1, key_fn=_key, verbose=False)
    litstream.merge_datasets([ls_out, other], merged)
    for out, count in [(ls_out, N), (merged, N + 5)]:
        theirs = litdata.StreamingDataset(str(out))
        for i in range(count):
            assert _same(theirs.get_by_key(f"item-{i}"), _sample(i))
    # (LitData 0.2.76's own append with key_fn fails on a local output: it concatenates its sidecar twice.)


def test_the_legacy_single_keys_parquet_is_read_by_both(tmp_path: Path) -> None:
    """LitData's older layout: one ``keys.parquet`` at the root, no ``keys/`` and no ``keys`` section in
    ``index.json``; LitData 0.2.76 still reads it (``utilities/keys_index.py``), and so does litstream."""
    import json

    import polars as pl
    from litdata.utilities.keys_index import save_keys

    out = tmp_path / "ld"
    litdata.optimize(_sample, list(range(N)), str(out), chunk_size=4, num_workers=1)
    assert "keys" not in json.loads((out / "index.json").read_text())
    save_keys(str(out / "keys.parquet"), [f"item-{i}" for i in range(N)])  # LitData's single-file writer
    assert not (out / "keys").exists()
    theirs = litdata.StreamingDataset(str(out))
    ours = litstream.StreamingDataset(out)
    for i in range(N):
        assert _same(ours[f"item-{i}"], theirs.get_by_key(f"item-{i}"))
        assert _same(ours[f"item-{i}"], _sample(i))
    with pytest.raises(KeyError, match="'item-99'"):
        ours["item-99"]
    # int keys, written by Polars with LitData's schema (key Int64, index Int64, sorted by key, zstd)
    schema = {"key": pl.Int64, "index": pl.Int64}
    frame = pl.DataFrame({"key": [i * 7 for i in range(N)], "index": list(range(N))}, schema=schema)
    frame.sort("key").write_parquet(out / "keys.parquet", compression="zstd")
    theirs, ours = litdata.StreamingDataset(str(out)), litstream.StreamingDataset(out)
    for i in range(N):
        assert _same(ours.get_by_key(i * 7), theirs.get_by_key(i * 7))
        assert _same(ours.get_by_key(i * 7), _sample(i))
    update = {"id": "item-3", "x": np.array([9, 9, 9, 9], dtype=np.int64)}
    litstream.dataset_update(str(out), {21: update})  # an update through the legacy sidecar
    assert _same(litstream.StreamingDataset(out).get_by_key(21), update)
    assert _same(litdata.StreamingDataset(str(out)).get_by_key(21), update)
    # a new keys/ store replaces the legacy file, as LitData's writer does
    litstream.build_keys_index(str(out), _key, overwrite=True, verbose=False)
    assert not (out / "keys.parquet").exists()
    assert _same(litstream.StreamingDataset(out)["item-3"], update)
    assert _same(litdata.StreamingDataset(str(out)).get_by_key("item-3"), update)
