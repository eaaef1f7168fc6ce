"""Every way in serves the same samples: face x item loader x backend (issue 26's parity matrix).

Faces: ``StreamingDataset``, ``astream(path)``, ``astream(dataset)``, ``CombinedStreamingDataset`` and
``ParallelStreamingDataset`` of one member, each sync and through ``.astream()``. Item loaders: PyTree,
Tokens, Parquet through ``index_path``, MDS (written by mosaic's own writer), encrypted, subsampled.
Backends: asyncio and trio (the sync faces run in a worker thread of the test's event loop). Every face
opens the same ``read._spec.ReadSpec``; before it, Combined / Parallel ``.astream()`` read their members
without the item loader, the index path and the cache (a Tokens member failed).
"""

from __future__ import annotations

import pickle
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import anyio.to_thread
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import litstream
from litstream import (
    CombinedStreamingDataset,
    ConfigurationError,
    FernetEncryption,
    ParallelStreamingDataset,
    ParquetLoader,
    StreamingDataset,
    TokensLoader,
    astream,
    index_parquet_dataset,
    optimize,
)
from litstream.read._spec import ReadSpec
from peer import require_peer

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore:unclosed file:ResourceWarning")]

N = 60
SEED = 7
BLOCK = 5


def _pytree(i: int) -> dict[str, Any]:
    return {"i": i, "x": np.full(3, i, dtype=np.int32), "name": f"n{i}"}


def _tokens(i: int) -> np.ndarray:
    return np.arange(i * 20, i * 20 + 20, dtype=np.int64)


def _mds_write(out: Path) -> None:
    job = {
        "out": str(out),
        "columns": {"i": "int", "name": "str"},
        "compression": None,
        "size_limit": 200,
        "samples": [{"i": i, "name": f"n{i}"} for i in range(N)],
    }
    script = Path(__file__).parent / "compat" / "mds_writer.py"
    done = subprocess.run(
        [sys.executable, str(script)], input=pickle.dumps(job), capture_output=True, check=False, timeout=240
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict[str, Any]]]:
    """``loader name -> (input_dir, the reader's keyword arguments)``."""
    root = tmp_path_factory.mktemp("faces")
    out: dict[str, tuple[Path, dict[str, Any]]] = {}
    optimize(_pytree, list(range(N)), root / "pytree", chunk_size=7, num_workers=1, verbose=False)
    out["pytree"] = (root / "pytree", {})
    out["subsampled"] = (root / "pytree", {"subsample": 0.6})
    optimize(_tokens, list(range(N // 4)), root / "tokens", chunk_size=40, item_loader=TokensLoader(), num_workers=1,
             verbose=False)  # fmt: skip
    out["tokens"] = (root / "tokens", {"item_loader": TokensLoader(BLOCK)})
    parquet = root / "parquet"
    parquet.mkdir()
    for k in range(3):
        rows = [{"id": i, "text": f"t{i}"} for i in range(k * 20, k * 20 + 20)]
        pq.write_table(pa.Table.from_pylist(rows), parquet / f"part-{k}.parquet", row_group_size=6)
    index_parquet_dataset(parquet, cache_dir=root / "parquet-index")
    out["parquet"] = (parquet, {"item_loader": ParquetLoader(), "index_path": root / "parquet-index" / "index.json"})
    _mds_write(root / "mds")
    out["mds"] = (root / "mds", {})
    enc = FernetEncryption("pw", level="sample")
    optimize(_pytree, list(range(N)), root / "enc", chunk_size=7, num_workers=1, encryption=enc, verbose=False)
    enc.save(root / "key.json")
    out["encrypted"] = (root / "enc", {"encryption": FernetEncryption.load(root / "key.json", "pw")})
    return out


def _plain(value: Any) -> Any:
    """A comparable form of a sample (arrays and tensors as lists, dicts as sorted pairs)."""
    if isinstance(value, dict):
        return tuple(sorted((k, _plain(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_plain(v) for v in value)
    if hasattr(value, "tolist"):
        return ("array", _plain(value.tolist()))
    return value


def _dataset(path: Path, kwargs: dict[str, Any]) -> StreamingDataset:
    return StreamingDataset(path, shuffle=True, seed=SEED, **kwargs)


async def _collect(stream: Any) -> list[Any]:
    async with stream as samples:
        return [s async for s in samples]


def _first(samples: list[tuple[Any, ...]]) -> list[Any]:
    assert all(isinstance(s, tuple) and len(s) == 1 for s in samples)
    return [s[0] for s in samples]


async def _face(face: str, path: Path, kwargs: dict[str, Any]) -> list[Any]:
    sync = partial(anyio.to_thread.run_sync, abandon_on_cancel=False)
    if face == "StreamingDataset":
        return await sync(lambda: list(_dataset(path, kwargs)))
    if face == "astream(path)":
        return await _collect(astream(path, shuffle=True, seed=SEED, **kwargs))
    if face == "astream(dataset)":
        return await _collect(astream(_dataset(path, kwargs), shuffle=True, seed=SEED))
    if face == "Combined":
        return await sync(lambda: list(CombinedStreamingDataset([_dataset(path, kwargs)])))
    if face == "Combined.astream()":
        return await _collect(CombinedStreamingDataset([_dataset(path, kwargs)]).astream())
    if face == "Parallel":
        return _first(await sync(lambda: list(ParallelStreamingDataset([_dataset(path, kwargs)]))))
    assert face == "Parallel.astream()"
    return _first(await _collect(ParallelStreamingDataset([_dataset(path, kwargs)]).astream()))


FACES = [
    "StreamingDataset",
    "astream(path)",
    "astream(dataset)",
    "Combined",
    "Combined.astream()",
    "Parallel",
    "Parallel.astream()",
]
LOADERS = ["pytree", "tokens", "parquet", "mds", "encrypted", "subsampled"]
LENGTHS = {"pytree": N, "tokens": (N // 4) * 20 // BLOCK, "parquet": N, "mds": N, "encrypted": N, "subsampled": 36}


@pytest.mark.parametrize("loader", LOADERS)
@pytest.mark.parametrize("face", FACES)
async def test_every_face_serves_the_samples_streaming_dataset_serves(
    face: str, loader: str, datasets: dict[str, tuple[Path, dict[str, Any]]]
) -> None:
    path, kwargs = datasets[loader]
    expected = [_plain(s) for s in await anyio.to_thread.run_sync(lambda: list(_dataset(path, kwargs)))]
    assert len(expected) == LENGTHS[loader]
    assert len(set(expected)) == len(expected)  # every sample once
    if loader == "subsampled" and face.startswith(("Combined", "Parallel")):
        with pytest.raises(ConfigurationError, match="serves a selection"):
            await _face(face, path, kwargs)  # composites mix whole datasets only (documented)
        return
    got = [_plain(s) for s in await _face(face, path, kwargs)]
    assert got == expected


async def test_the_shuffle_is_real(datasets: dict[str, tuple[Path, dict[str, Any]]]) -> None:
    """The matrix compares orders, not only sets: the shuffled order is not index order."""
    path, kwargs = datasets["pytree"]
    got = [s["i"] for s in await _collect(astream(path, shuffle=True, seed=SEED, **kwargs))]
    assert sorted(got) == list(range(N))
    assert got != sorted(got)


@pytest.mark.parametrize("window", [0, 3, "auto"])
async def test_astream_item_shuffle_window_orders_as_streaming_dataset(
    window: int | str, datasets: dict[str, tuple[Path, dict[str, Any]]]
) -> None:
    path, _ = datasets["pytree"]
    expected = await anyio.to_thread.run_sync(
        lambda: [s["i"] for s in StreamingDataset(path, shuffle=True, seed=SEED, item_shuffle_window=window)]
    )
    got = [s["i"] for s in await _collect(astream(path, shuffle=True, seed=SEED, item_shuffle_window=window))]
    assert got == expected
    ds = StreamingDataset(path, shuffle=True, seed=SEED, item_shuffle_window=window)
    assert [s["i"] for s in await _collect(astream(ds, shuffle=True, seed=SEED))] == expected


def test_a_pickled_dataset_holds_the_spec_and_a_few_ints(datasets: dict[str, tuple[Path, dict[str, Any]]]) -> None:
    path, kwargs = datasets["tokens"]
    ds = _dataset(path, kwargs)
    ds.set_epoch(3)
    len(ds)  # opens the source in this process: it must not travel
    pickled = ds.__getstate__()
    assert isinstance(pickled, dict)
    assert set(pickled) == {"_reader"}  # the dataset holds its reader, nothing else
    state = ds._reader.__getstate__()
    assert isinstance(state["spec"], ReadSpec)
    assert set(state) == {
        "spec",  # what to read and how
        "current_epoch", "batch_size", "num_workers", "loader_prefetch", "max_memory",  # counters and budget
        "num_canonical_nodes", "force_override_state_dict",  # how a checkpoint is written and loaded
        "resume", "parent_env",  # the loaded checkpoint; the rank of the process that starts workers
    }  # fmt: skip
    blob = pickle.dumps(ds)
    assert len(blob) < len(pickle.dumps(state["spec"])) + 1024  # the spec, and a few small values besides
    copy = pickle.loads(blob)
    assert copy._reader.opened is None
    assert copy._reader.spec.config() == ds._reader.spec.config()
    assert copy.current_epoch == 3
    assert [_plain(s) for s in copy] == [_plain(s) for s in ds]


# ------------------------------------------------------------------------------- against LitData's loader


def _ints(i: int) -> dict[str, int]:
    return {"i": i}


@pytest.fixture(scope="module")
def ints_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ints") / "data"
    optimize(_ints, list(range(40)), out, chunk_size=6, num_workers=1, verbose=False)
    return out


@pytest.mark.litdata
def test_persistent_workers_reshuffle_every_epoch_like_litdata(ints_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    litdata = require_peer("litdata")
    monkeypatch.setenv("LITDATA_POSIX_FAST", "0")
    kwargs: dict[str, Any] = {"batch_size": 4, "num_workers": 1, "persistent_workers": True}
    ours = litstream.StreamingDataLoader(StreamingDataset(ints_dir, shuffle=True, seed=SEED), **kwargs)
    # spawn, not fork from this threaded pytest worker; a spawned worker sees LITDATA_POSIX_FAST set above
    theirs = litdata.StreamingDataLoader(
        litdata.StreamingDataset(str(ints_dir), shuffle=True, seed=SEED), **kwargs, multiprocessing_context="spawn"
    )
    epochs = []
    for _ in range(3):
        mine = [int(x) for batch in ours for x in batch["i"]]
        assert mine == [int(x) for batch in theirs for x in batch["i"]]
        epochs.append(mine)
    assert sorted(epochs[0]) == list(range(40))
    assert len({tuple(e) for e in epochs}) == 3  # a new order every epoch


@pytest.mark.litdata
@pytest.mark.filterwarnings("ignore:The provided `max_cache_size`")
def test_max_cache_size_below_a_node_shard_gives_litdatas_epoch_two(
    ints_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two nodes of two ranks: with a cache budget below a node's shard LitData's epoch 2 plans globally."""
    litdata = require_peer("litdata")
    monkeypatch.setenv("LITDATA_POSIX_FAST", "0")
    monkeypatch.delenv("MAX_CACHE_SIZE", raising=False)
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("NNODES", "2")
    budget = 60  # bytes: below every node's shard of chunks
    changed = False
    for rank in range(4):
        monkeypatch.setenv("GLOBAL_RANK", str(rank))
        theirs = litdata.StreamingDataset(str(ints_dir), shuffle=True, seed=SEED, max_cache_size=budget)
        theirs.set_epoch(2)
        ours = StreamingDataset(ints_dir, shuffle=True, seed=SEED, max_cache_size=budget)
        ours.set_epoch(2)
        mine = [s["i"] for s in ours]
        assert mine == [int(s["i"]) for s in theirs], f"rank {rank}"
        assert len(ours) == len(mine)
        unlimited = StreamingDataset(ints_dir, shuffle=True, seed=SEED)
        unlimited.set_epoch(2)
        changed = changed or [s["i"] for s in unlimited] != mine
    assert changed  # the budget decided the order: each node kept its own shard without it
