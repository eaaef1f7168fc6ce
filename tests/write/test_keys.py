"""Keyed datasets in litstream alone: ``optimize(key_fn=)``, ``ds[key]``, append, merge, checkpoint resume,
S3, subsets, missing and duplicate keys, ``build_keys_index`` and ``dataset_update`` (incl. kill -9)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from litstream import (
    ConfigurationError,
    DatasetNotFoundError,
    DuplicateKeyError,
    KeyNotFoundError,
    OutputNotEmptyError,
    StreamingDataset,
    VersionNotFoundError,
    WorkerError,
    build_keys_index,
    dataset_update,
    list_versions,
    merge_datasets,
    optimize,
    train_test_split,
)

if TYPE_CHECKING:
    from pathlib import Path

    from servers import S3Server


def sample(i: int) -> dict[str, Any]:
    return {"id": f"id-{i}", "x": np.arange(i, i + 3, dtype=np.int64)}


def key_of(s: dict[str, Any]) -> str:
    return str(s["id"])


def assert_same(a: dict[str, Any], b: dict[str, Any]) -> None:
    assert a["id"] == b["id"]
    np.testing.assert_array_equal(a["x"], b["x"])


def make(out: Any, n: int = 20, workers: int = 2, **kwargs: Any) -> None:
    optimize(sample, list(range(n)), out, chunk_size=3, num_workers=workers, key_fn=key_of, verbose=False, **kwargs)


def test_every_key_finds_its_sample_and_the_sidecar_is_litdatas_layout(tmp_path: Path) -> None:
    make(tmp_path, n=20)
    index = json.loads((tmp_path / "index.json").read_text())
    assert index["keys"] == {"num_shards": 1, "sharding": "none", "version": 1}
    assert sorted(p.name for p in (tmp_path / "keys").iterdir()) == ["shard-00000.parquet"]
    assert not list(tmp_path.glob("*.keys.parquet"))
    table = pq.read_table(tmp_path / "keys" / "shard-00000.parquet")
    assert table.column_names == ["key", "index", "chunk_index", "chunk_offset"]
    assert table.column("key").to_pylist() == sorted(f"id-{i}" for i in range(20))
    ds = StreamingDataset(tmp_path)
    for i in range(20):
        assert_same(ds[f"id-{i}"], sample(i))
        position = table.column("index").to_pylist()[table.column("key").to_pylist().index(f"id-{i}")]
        assert_same(ds[position], sample(i))
    got = ds.get_by_keys(["id-19", "id-0", "id-7"])
    for s, i in zip(got, [19, 0, 7], strict=True):
        assert_same(s, sample(i))


def test_missing_key_raises_keyerror_naming_it(tmp_path: Path) -> None:
    make(tmp_path, n=5, workers=1)
    ds = StreamingDataset(tmp_path)
    with pytest.raises(KeyError, match="'nope'") as info:
        ds["nope"]
    assert isinstance(info.value, KeyNotFoundError)
    with pytest.raises(KeyNotFoundError, match="'id-9'"):
        ds.get_by_key("id-9")
    with pytest.raises(ConfigurationError, match="keys must be str or int"):
        ds.get_by_key(1.5)  # type: ignore[arg-type]


def test_a_dataset_without_sidecar_says_how_to_make_one(tmp_path: Path) -> None:
    optimize(sample, list(range(4)), tmp_path, chunk_size=2, num_workers=1, verbose=False)
    with pytest.raises(KeyNotFoundError, match="build_keys_index"):
        StreamingDataset(tmp_path)["id-1"]


def test_a_legacy_root_keys_parquet_is_read_when_keys_dir_is_absent(tmp_path: Path) -> None:
    import pyarrow as pa

    optimize(sample, list(range(6)), tmp_path, chunk_size=2, num_workers=1, verbose=False)
    table = pa.table({"key": pa.array([f"id-{i}" for i in range(6)]), "index": pa.array(range(6), pa.int64())})
    pq.write_table(table, tmp_path / "keys.parquet", compression="zstd")  # LitData's older single-file sidecar
    ds = StreamingDataset(tmp_path)
    for i in (5, 0, 3):
        assert_same(ds[f"id-{i}"], sample(i))
    with pytest.raises(KeyNotFoundError, match="'id-6'"):
        ds["id-6"]
    (tmp_path / "keys.parquet").unlink()
    with pytest.raises(KeyNotFoundError, match=r"keys/shard-00000.parquet and keys.parquet are absent"):
        StreamingDataset(tmp_path)["id-1"]


def dup_fn(i: int) -> dict[str, Any]:
    return {"id": "same" if i in (3, 11) else f"id-{i}", "x": np.zeros(2)}


def test_duplicate_key_is_refused_with_both_inputs(tmp_path: Path) -> None:
    with pytest.raises(DuplicateKeyError, match=r"duplicate key 'same'.*index 11 and index 3"):
        optimize(dup_fn, list(range(16)), tmp_path, chunk_size=2, num_workers=2, key_fn=key_of, verbose=False)
    assert not (tmp_path / "index.json").exists()
    assert not list(tmp_path.glob("*.keys.parquet"))
    assert not list(tmp_path.glob("chunk-*"))


def test_key_fn_errors_name_the_input(tmp_path: Path) -> None:
    with pytest.raises(WorkerError, match=r"index 0.*keys must be str or int"):
        optimize(sample, [0, 1], tmp_path, chunk_size=2, num_workers=1, key_fn=lambda s: None, verbose=False)


def test_append_extends_the_sidecar_and_refuses_mismatches(tmp_path: Path) -> None:
    make(tmp_path, n=10)
    optimize(
        sample, list(range(10, 17)), tmp_path, chunk_size=3, num_workers=2, key_fn=key_of, mode="append", verbose=False
    )
    ds = StreamingDataset(tmp_path)
    assert len(ds) == 17
    for i in range(17):
        assert_same(ds[f"id-{i}"], sample(i))
    with pytest.raises(ConfigurationError, match="pass key_fn="):
        optimize(sample, [20], tmp_path, chunk_size=3, num_workers=1, mode="append", verbose=False)
    with pytest.raises(DuplicateKeyError, match="'id-3'"):
        optimize(sample, [3], tmp_path, chunk_size=3, num_workers=1, key_fn=key_of, mode="append", verbose=False)
    plain = tmp_path / "plain"
    optimize(sample, [1], plain, chunk_size=3, num_workers=1, verbose=False)
    with pytest.raises(ConfigurationError, match="build_keys_index"):
        optimize(sample, [2], plain, chunk_size=3, num_workers=1, key_fn=key_of, mode="append", verbose=False)


def test_merge_datasets_merges_the_sidecars(tmp_path: Path) -> None:
    make(tmp_path / "a", n=7)
    optimize(sample, list(range(7, 12)), tmp_path / "b", chunk_size=2, num_workers=1, key_fn=key_of, verbose=False)
    merge_datasets([str(tmp_path / "a"), str(tmp_path / "b")], str(tmp_path / "m"))
    ds = StreamingDataset(tmp_path / "m")
    for i in range(12):
        assert_same(ds[f"id-{i}"], sample(i))
    make(tmp_path / "c", n=2, workers=1)
    with pytest.raises(DuplicateKeyError, match="'id-0'"):
        merge_datasets([str(tmp_path / "a"), str(tmp_path / "c")], str(tmp_path / "m2"))
    assert not (tmp_path / "m2").exists() or not list((tmp_path / "m2").iterdir())


FLAG = "LITSTREAM_TEST_KEYS_FAIL"


def failing_once(i: int) -> dict[str, Any]:
    if i == 7 and os.environ.get(FLAG) and os.path.exists(os.environ[FLAG]):
        os.remove(os.environ[FLAG])
        raise RuntimeError("transient")
    return sample(i)


def test_checkpoint_resume_keeps_every_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    flag = tmp_path / "flag"
    flag.touch()
    monkeypatch.setenv(FLAG, str(flag))
    out = tmp_path / "out"
    kwargs: dict[str, Any] = {"chunk_size": 2, "num_workers": 2, "use_checkpoint": True, "key_fn": key_of}
    with pytest.raises(WorkerError, match="transient"):
        optimize(failing_once, list(range(12)), out, verbose=False, **kwargs)
    assert not (out / "index.json").exists()
    optimize(failing_once, list(range(12)), out, verbose=False, **kwargs)
    ds = StreamingDataset(out)
    assert len(ds) == 12
    for i in range(12):
        assert_same(ds[f"id-{i}"], sample(i))
    assert not list(out.glob("*.keys.parquet"))


def test_subsets_and_splits_find_only_their_keys(tmp_path: Path) -> None:
    make(tmp_path, n=20)
    ds = StreamingDataset(tmp_path)
    sub = ds.subset(list(range(5)))
    inside = [ds[i]["id"] for i in range(5)]
    for key in inside:
        assert sub[key]["id"] == key
    outside = ds[10]["id"]
    with pytest.raises(KeyNotFoundError, match="not in this subset"):
        sub[outside]
    train, test = train_test_split(ds, [0.5, 0.5])
    train_ids = {s["id"] for s in train}
    for i in range(20):
        key = f"id-{i}"
        if key in train_ids:
            assert train[key]["id"] == key
        else:
            with pytest.raises(KeyNotFoundError):
                train[key]
            assert test[key]["id"] == key


def test_build_keys_index_backfills_and_refuses_to_overwrite(tmp_path: Path) -> None:
    optimize(sample, list(range(9)), tmp_path, chunk_size=2, num_workers=2, compression="zstd", verbose=False)
    path = build_keys_index(str(tmp_path), key_of, verbose=False, num_shards=3)
    assert path == str(tmp_path / "keys")
    assert json.loads((tmp_path / "index.json").read_text())["keys"]["num_shards"] == 3
    ds = StreamingDataset(tmp_path)
    for i in range(9):
        assert_same(ds[f"id-{i}"], sample(i))
    with pytest.raises(OutputNotEmptyError, match="overwrite=True"):
        build_keys_index(str(tmp_path), key_of, verbose=False)
    build_keys_index(str(tmp_path), lambda s: int(s["x"][0]) * 10, verbose=False, overwrite=True)
    assert sorted(p.name for p in (tmp_path / "keys").iterdir()) == ["shard-00000.parquet"]
    fresh = StreamingDataset(tmp_path)
    assert_same(fresh.get_by_key(40), sample(4))
    with pytest.raises(KeyNotFoundError):
        fresh["40"]  # a str is not the int key 40


def test_dataset_update_replaces_and_old_readers_keep_their_view(tmp_path: Path) -> None:
    make(tmp_path, n=10)
    before = StreamingDataset(tmp_path)
    assert_same(before["id-4"], sample(4))
    new = {"id": "id-4", "x": np.array([-1, -2, -3], dtype=np.int64)}
    with dataset_update(str(tmp_path)) as update:
        update["id-4"] = new
        update.commit()
        with pytest.raises(RuntimeError, match="committed"):
            update["id-5"] = new
    after = StreamingDataset(tmp_path)
    assert_same(after["id-4"], new)
    assert_same(after["id-5"], sample(5))
    assert [after[i]["id"] for i in range(10)] == [before[i]["id"] for i in range(10)]
    assert_same(before["id-4"], sample(4))  # opened before: the old, consistent view
    assert_same(before[[s["id"] for s in after].index("id-3")], sample(3))
    with dataset_update(str(tmp_path)) as update:
        update["id-4"] = sample(4)  # dropped: no commit
    assert_same(StreamingDataset(tmp_path)["id-4"], new)


def test_dataset_update_refuses_unknown_keys_and_other_formats(tmp_path: Path) -> None:
    make(tmp_path, n=6, workers=1)
    files = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(KeyNotFoundError, match="'ghost'"):
        dataset_update(str(tmp_path), {"ghost": sample(1), "id-1": sample(1)})
    with pytest.raises(ValueError, match="data_format"):
        dataset_update(str(tmp_path), {"id-1": {"id": "id-1", "x": np.zeros(3, dtype=np.float32)}})
    assert sorted(p.name for p in tmp_path.iterdir()) == files
    plain = tmp_path / "plain"
    optimize(sample, [1], plain, chunk_size=3, num_workers=1, verbose=False)
    with pytest.raises(DatasetNotFoundError, match="build_keys_index"):
        dataset_update(str(plain))


UPDATE_SCRIPT = """
import sys
from pathlib import Path
import numpy as np
from litstream import dataset_update

out, started = sys.argv[1], Path(sys.argv[2])
update = dataset_update(out)
for i in range(400):
    update[f"id-{i}"] = {"id": f"id-{i}", "x": np.array([-i, -i, -i], dtype=np.int64)}
started.touch()
update.commit()
"""


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_kill_9_during_dataset_update_leaves_old_or_new(tmp_path: Path, seed: int) -> None:
    out = tmp_path / "out"
    optimize(sample, list(range(400)), out, chunk_size=2, num_workers=1, key_fn=key_of, verbose=False)
    started = tmp_path / "started"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen([sys.executable, "-c", UPDATE_SCRIPT, str(out), str(started)], env=env)
    try:
        deadline = time.monotonic() + 120
        while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert started.exists(), "the update process did not start its commit"
        time.sleep(random.Random(seed).uniform(0.0, 1.5))  # the random kill point (a commit takes ~1 s)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    ds = StreamingDataset(out)
    assert len(ds) == 400
    states = set()
    for i in range(400):
        got = ds[f"id-{i}"]
        assert got["id"] == f"id-{i}"
        if np.array_equal(got["x"], sample(i)["x"]):
            states.add("old")
        else:
            np.testing.assert_array_equal(got["x"], [-i, -i, -i])
            states.add("new")
    assert len(states) == 1, states  # all old or all new: never a mix
    dataset_update(str(out), {"id-0": {"id": "id-0", "x": np.array([7, 7, 7], dtype=np.int64)}})
    np.testing.assert_array_equal(StreamingDataset(out)["id-0"]["x"], [7, 7, 7])


@pytest.mark.slow
def test_s3_write_lookup_update_and_build(s3_server: S3Server) -> None:
    import uuid

    url = f"s3://{s3_server.bucket}/keys-{uuid.uuid4().hex[:10]}"
    options = s3_server.options()
    make(url, n=12, storage_options=options)
    ds = StreamingDataset(url, storage_options=options)
    for i in range(12):
        assert_same(ds[f"id-{i}"], sample(i))
    with pytest.raises(KeyNotFoundError, match="'id-99'"):
        ds["id-99"]
    new = {"id": "id-3", "x": np.array([-5, -5, -5], dtype=np.int64)}
    dataset_update(url, {"id-3": new}, storage_options=options)
    assert_same(StreamingDataset(url, storage_options=options)["id-3"], new)
    assert_same(ds["id-3"], sample(3))  # the reader opened before keeps its view
    path = build_keys_index(url, lambda s: int(s["x"][1]), storage_options=options, overwrite=True, verbose=False)
    assert path == f"{url}/keys"
    assert_same(StreamingDataset(url, storage_options=options).get_by_key(-5), new)
    assert_same(StreamingDataset(url, storage_options=options).get_by_key(9), sample(8))


@pytest.mark.anyio
async def test_async_uploader_keeps_the_sidecar_with_each_commit(tmp_path: Path) -> None:
    from litstream import AsyncUploader

    async with AsyncUploader(tmp_path, chunk_size=3, key_fn=key_of) as up:
        for i in range(7):
            await up.add(sample(i))
        assert await up.flush() == 7
        assert_same(StreamingDataset(tmp_path)["id-6"], sample(6))
        with pytest.raises(DuplicateKeyError, match=r"duplicate key 'id-2': sample 7 of this uploader and sample 2"):
            await up.add(sample(2))
        await up.add(sample(7))
    async with AsyncUploader(tmp_path, chunk_size=3, key_fn=key_of) as up:
        await up.add(sample(8))
        with pytest.raises(DuplicateKeyError, match="previous dataset"):
            await up.add(sample(0))
    ds = StreamingDataset(tmp_path)
    assert len(ds) == 9
    for i in range(9):
        assert_same(ds[f"id-{i}"], sample(i))
    with pytest.raises(ConfigurationError, match="pass key_fn="):
        async with AsyncUploader(tmp_path, chunk_size=3) as up:
            pass


def test_three_nodes_merge_their_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "ds"
    for rank in range(3):
        monkeypatch.setenv("DATA_OPTIMIZER_NUM_NODES", "3")
        monkeypatch.setenv("DATA_OPTIMIZER_NODE_RANK", str(rank))
        make(out, n=31)
        if rank < 2:  # the key files wait for the last node
            assert not (out / "keys").exists()
    assert sorted(p.name for p in out.glob("*keys*")) == ["keys"]
    ds = StreamingDataset(out)
    assert len(ds) == 31
    for i in range(31):
        assert_same(ds[f"id-{i}"], sample(i))


def test_a_pickled_dataset_loads_its_own_key_shard(tmp_path: Path) -> None:
    import pickle

    make(tmp_path, n=8)
    ds = StreamingDataset(tmp_path)
    assert_same(ds["id-2"], sample(2))
    copy = pickle.loads(pickle.dumps(ds))
    assert copy._reader._key_reader is not ds._reader._key_reader
    assert_same(copy["id-5"], sample(5))


def test_dataset_update_of_a_compressed_checksummed_dataset(tmp_path: Path) -> None:
    make(tmp_path, n=9, compression="zstd", checksum="sha256")
    new = {"id": "id-8", "x": np.array([3, 2, 1], dtype=np.int64)}
    dataset_update(str(tmp_path), {"id-8": new}, delete_replaced=True)
    index = json.loads((tmp_path / "index.json").read_text())
    names = [c["filename"] for c in index["chunks"]]
    assert sum("-u" in n for n in names) == 1
    assert sorted(p.name for p in tmp_path.glob("chunk-*")) == sorted(names)  # the replaced file is gone
    versions = list_versions(tmp_path)  # and with it every version that named it: none is left half readable
    assert [(v.number, v.operation, v.latest) for v in versions] == [(2, "dataset_update", True)]
    with pytest.raises(VersionNotFoundError, match="version 1"):
        len(StreamingDataset(tmp_path, version=1))
    ds = StreamingDataset(tmp_path)
    assert_same(ds["id-8"], new)
    assert [s["id"] for s in ds] == [StreamingDataset(tmp_path)[i]["id"] for i in range(9)]
    assert sorted(s["id"] for s in ds) == sorted(f"id-{i}" for i in range(9))
    got = StreamingDataset(tmp_path).get_by_keys([f"id-{i}" for i in range(9)])  # concurrent reads, one chunk each
    assert [s["id"] for s in got] == [f"id-{i}" for i in range(9)]
    assert_same(got[8], new)
    with pytest.raises(KeyNotFoundError, match="'id-77'"):
        ds.get_by_keys(["id-1", "id-77"])


def test_key_fn_must_be_callable(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="key_fn must be a callable"):
        optimize(sample, [1], tmp_path, chunk_size=2, num_workers=1, key_fn="id", verbose=False)  # type: ignore[arg-type]
    assert not list(tmp_path.iterdir())
