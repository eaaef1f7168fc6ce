"""Reading a TokensLoader dataset: windows, length, ``ds[i]``, sharding, shuffling, resume, astream.

The data: ``NUM_ARRAYS`` arrays of consecutive token ids (array ``i`` starts where array ``i - 1``
ended), written with one worker and a token budget, so chunk ``k`` holds the tokens
``[first_k, first_k + dim_k)`` and the expected windows follow from ``index.json`` alone.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import torch

from litstream import (
    ConfigurationError,
    FormatError,
    PyTreeLoader,
    StreamingDataLoader,
    StreamingDataset,
    TokensLoader,
    astream,
    optimize,
)
from resume_law import assert_resume_law

if TYPE_CHECKING:
    from pathlib import Path

NUM_ARRAYS = 40
LENGTHS = [3 + (5 * i) % 17 for i in range(NUM_ARRAYS)]
BASE = [sum(LENGTHS[:i]) for i in range(NUM_ARRAYS)]
BLOCK = 8


def tokens(i: int) -> torch.Tensor:
    return torch.arange(BASE[i], BASE[i] + LENGTHS[i], dtype=torch.int32)


def first_token(window: torch.Tensor) -> int:
    """A window's identity: its first token id (windows are disjoint runs of consecutive ids)."""
    return int(window[0])


def _windows(directory: Path, block: int) -> list[list[int]]:
    """Expected windows in index order from index.json: chunk k holds the next dim_k consecutive ids."""
    out, first = [], 0
    for chunk in json.loads((directory / "index.json").read_text())["chunks"]:
        out += [list(range(first + b * block, first + (b + 1) * block)) for b in range(chunk["dim"] // block)]
        first += chunk["dim"]
    return out


@pytest.fixture(scope="module")
def token_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("tokens") / "data"
    optimize(
        tokens, list(range(NUM_ARRAYS)), d, chunk_size=50, item_loader=TokensLoader(), num_workers=1, verbose=False
    )
    return d


@pytest.fixture(scope="module")
def zstd_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("tokens_zstd") / "data"
    optimize(
        tokens,
        list(range(NUM_ARRAYS)),
        d,
        chunk_size=50,
        compression="zstd",
        item_loader=TokensLoader(),
        num_workers=1,
        verbose=False,
    )
    return d


def test_index_records_token_counts(token_dir: Path) -> None:
    index = json.loads((token_dir / "index.json").read_text())
    chunks = index["chunks"]
    assert sum(c["dim"] for c in chunks) == sum(LENGTHS)
    assert sum(c["chunk_size"] for c in chunks) == NUM_ARRAYS
    assert all(c["dim"] <= 50 for c in chunks)
    assert len(chunks) > 5
    assert index["config"]["item_loader"] == "TokensLoader"
    assert index["config"]["data_format"] == ["no_header_tensor:16"]  # int32 in the torch dtype table


@pytest.mark.parametrize("compressed", [False, True])
def test_windows_len_and_getitem(token_dir: Path, zstd_dir: Path, compressed: bool) -> None:
    directory = zstd_dir if compressed else token_dir
    expected = _windows(token_dir, BLOCK)
    ds = StreamingDataset(directory, item_loader=TokensLoader(BLOCK))
    windows = list(ds)
    assert len(ds) == len(expected)
    assert [w.tolist() for w in windows] == expected
    assert all(w.dtype == torch.int32 and w.shape == (BLOCK,) for w in windows)
    assert [ds[i].tolist() for i in range(len(ds))] == expected
    assert ds[-1].tolist() == expected[-1]
    assert [w.tolist() for w in ds[2:5]] == expected[2:5]
    with pytest.raises(IndexError, match=f"index {len(expected)} is out of range for a dataset of {len(expected)}"):
        ds[len(expected)]


def test_windows_never_cross_chunks_and_tails_are_dropped(token_dir: Path) -> None:
    """With a block larger than half of every chunk, each chunk serves at most one window."""
    dims = [c["dim"] for c in json.loads((token_dir / "index.json").read_text())["chunks"]]
    ds = StreamingDataset(token_dir, item_loader=TokensLoader(30))
    assert len(ds) == sum(d // 30 for d in dims) == sum(d >= 30 for d in dims)
    firsts = [int(w[0]) for w in ds]
    starts = [sum(dims[:k]) for k in range(len(dims)) if dims[k] >= 30]
    assert firsts == starts


def test_block_size_larger_than_every_chunk_gives_an_empty_dataset(token_dir: Path) -> None:
    ds = StreamingDataset(token_dir, item_loader=TokensLoader(1000))
    assert len(ds) == 0
    assert list(ds) == []


def test_shuffle_serves_every_window_once_in_a_new_order(token_dir: Path) -> None:
    expected = _windows(token_dir, BLOCK)
    ds = StreamingDataset(token_dir, item_loader=TokensLoader(BLOCK), shuffle=True, seed=5)
    first = [w.tolist() for w in ds]
    second = [w.tolist() for w in ds]  # epoch 2
    assert sorted(first) == sorted(second) == sorted(expected)
    assert first != expected
    assert first != second


def test_window_shuffle_mixes_windows_of_neighbouring_chunks(zstd_dir: Path) -> None:
    expected = _windows(zstd_dir, BLOCK)
    ds = StreamingDataset(zstd_dir, item_loader=TokensLoader(BLOCK), shuffle="window", shuffle_window=3, seed=1)
    got = [w.tolist() for w in ds]
    assert sorted(got) == sorted(expected)
    assert len(ds) == len(expected)
    full = [w.tolist() for w in StreamingDataset(zstd_dir, item_loader=TokensLoader(BLOCK), shuffle=True, seed=1)]
    assert got != full


def test_ranks_and_workers_share_the_windows(token_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = sorted(_windows(token_dir, BLOCK))
    served: list[list[int]] = []
    monkeypatch.setenv("WORLD_SIZE", "2")
    lengths = []
    for rank in range(2):
        monkeypatch.setenv("GLOBAL_RANK", str(rank))
        ds = StreamingDataset(token_dir, item_loader=TokensLoader(BLOCK), shuffle=True, drop_last=False)
        loader = StreamingDataLoader(ds, batch_size=2, num_workers=2)
        part = [w for batch in loader for w in batch.tolist()]
        lengths.append(len(ds))
        assert len(part) == len(ds)
        served += part
    assert sorted(served) == expected
    assert min(lengths) > 0


# -- resume ---------------------------------------------------------------------------------------------


def _loader(directory: Path, *, shuffle: bool, workers: int, batch: int) -> Any:
    def make() -> StreamingDataLoader:
        ds = StreamingDataset(directory, item_loader=TokensLoader(BLOCK), shuffle=shuffle, transform=first_token)
        return StreamingDataLoader(ds, batch_size=batch, num_workers=workers)

    return make


@pytest.mark.parametrize(("shuffle", "workers", "batch", "stop"), [(False, 0, 3, 4), (True, 0, 2, 5), (True, 2, 3, 3)])
def test_resume_law(token_dir: Path, shuffle: bool, workers: int, batch: int, stop: int) -> None:
    outcome = assert_resume_law(_loader(token_dir, shuffle=shuffle, workers=workers, batch=batch), stop_after=stop)
    assert outcome.state["dataset"]["item_loader"] == {"block_size": BLOCK}
    served = sorted(outcome.consumed[0] + outcome.rest[0])
    assert served == sorted(w[0] for w in _windows(token_dir, BLOCK))
    assert len(outcome.consumed[0]) == stop * batch


def test_elastic_resume_to_another_worker_count(zstd_dir: Path) -> None:
    outcome = assert_resume_law(
        _loader(zstd_dir, shuffle=True, workers=2, batch=2),
        make_resumed_loader=_loader(zstd_dir, shuffle=True, workers=0, batch=3),
        stop_after=3,
    )
    assert sorted(outcome.consumed[0] + outcome.rest[0]) == sorted(w[0] for w in _windows(zstd_dir, BLOCK))


def test_resume_with_another_block_size_is_refused(token_dir: Path) -> None:
    loader = _loader(token_dir, shuffle=False, workers=0, batch=2)()
    it = iter(loader)
    next(it)
    state = loader.state_dict()
    it.close()
    other = StreamingDataLoader(StreamingDataset(token_dir, item_loader=TokensLoader(BLOCK + 1)), batch_size=2)
    with pytest.raises(
        ConfigurationError,
        match=r"checkpoint has item_loader=\{'block_size': 8\} but this dataset has item_loader=\{'block_size': 9\}",
    ):
        other.load_state_dict(state)


# -- astream --------------------------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("managed", [False, True])
async def test_astream_serves_the_same_windows(token_dir: Path, anyio_backend: str, managed: bool) -> None:
    kwargs: dict[str, Any] = {"item_loader": TokensLoader(BLOCK), "shuffle": True, "seed": 11, "epoch": 2}
    if managed:
        async with astream(token_dir, **kwargs) as samples:
            got = [w.tolist() async for w in samples]
    else:
        got = [w.tolist() async for w in astream(token_dir, **kwargs)]
    ds = StreamingDataset(token_dir, item_loader=TokensLoader(BLOCK), shuffle=True, seed=11)
    ds.set_epoch(2)
    assert got == [w.tolist() for w in ds]
    assert sorted(got) == sorted(_windows(token_dir, BLOCK))


@pytest.mark.anyio
async def test_astream_ranks_split_the_windows(zstd_dir: Path, anyio_backend: str) -> None:
    parts = []
    for rank in range(3):
        stream = astream(zstd_dir, item_loader=TokensLoader(BLOCK), rank=rank, world_size=3, batch_size=2)
        parts.append([w.tolist() async for w in stream])
    assert sorted(w for part in parts for w in part) == sorted(_windows(zstd_dir, BLOCK))
    assert all(parts)


@pytest.mark.anyio
async def test_astream_needs_a_block_size(token_dir: Path, anyio_backend: str) -> None:
    with pytest.raises(ConfigurationError, match=r"TokensLoader\(\) needs block_size to read"):
        astream(token_dir, item_loader=TokensLoader())
    with pytest.raises(ConfigurationError, match=r"read with PyTreeLoader; pass item_loader=TokensLoader"):
        [w async for w in astream(token_dir)]


# -- loader mismatches ----------------------------------------------------------------------------------


def test_pytree_loader_on_a_token_dataset_is_refused(token_dir: Path) -> None:
    ds = StreamingDataset(token_dir, item_loader=PyTreeLoader())
    with pytest.raises(
        ConfigurationError,
        match=r"was written with item_loader='TokensLoader' but is read with PyTreeLoader; "
        r"pass item_loader=TokensLoader\(block_size=\.\.\.\)",
    ):
        len(ds)


def test_tokens_loader_on_a_pytree_dataset_is_refused(tmp_path: Path) -> None:
    optimize(lambda i: {"i": i}, list(range(4)), tmp_path, chunk_size=2, num_workers=1, verbose=False)
    ds = StreamingDataset(tmp_path, item_loader=TokensLoader(4))
    with pytest.raises(
        ConfigurationError, match=r"written with item_loader='PyTreeLoader' but is read with TokensLoader; pass item"
    ):
        ds[0]


@pytest.mark.parametrize("bad", [0, -3, True, 2.5, "8"])
def test_bad_block_size_is_refused(bad: Any) -> None:
    with pytest.raises(
        ConfigurationError, match=rf"block_size must be a positive int \(tokens per item\) or None, got {bad!r}"
    ):
        TokensLoader(bad)


def test_reading_needs_a_block_size(token_dir: Path) -> None:
    with pytest.raises(
        ConfigurationError, match=r"TokensLoader\(\) needs block_size to read: pass TokensLoader\(block_size=N\)"
    ):
        StreamingDataset(token_dir, item_loader=TokensLoader())


def test_numpy_tokens_come_back_as_numpy(tmp_path: Path) -> None:
    optimize(
        lambda i: np.full(5, i, dtype=np.uint16),
        list(range(6)),
        tmp_path,
        chunk_size=12,
        item_loader=TokensLoader(),
        num_workers=1,
        verbose=False,
    )
    windows = list(StreamingDataset(tmp_path, item_loader=TokensLoader(4)))
    # chunks of 10 tokens (2 arrays each): windows [0,0,0,0] [0,1,1,1] per chunk, the 2-token tail dropped
    assert [w.tolist() for w in windows] == [
        [0, 0, 0, 0],
        [0, 1, 1, 1],
        [2, 2, 2, 2],
        [2, 3, 3, 3],
        [4, 4, 4, 4],
        [4, 5, 5, 5],
    ]
    assert all(isinstance(w, np.ndarray) and w.dtype == np.uint16 for w in windows)


def test_truncated_chunk_is_reported(tmp_path: Path) -> None:
    optimize(tokens, list(range(6)), tmp_path, chunk_size=50, item_loader=TokensLoader(), num_workers=1, verbose=False)
    first = json.loads((tmp_path / "index.json").read_text())["chunks"][0]
    assert first["dim"] == 48  # 12 whole blocks: cutting 10 bytes cuts into the last one
    chunk = tmp_path / first["filename"]
    chunk.write_bytes(chunk.read_bytes()[:-10])
    ds = StreamingDataset(tmp_path, item_loader=TokensLoader(4))
    last = first["dim"] // 4 - 1
    assert ds[last - 1].tolist() == list(range(4 * last - 4, 4 * last))
    with pytest.raises(FormatError, match=rf"{chunk.name} ends inside block {last}; the file is incomplete"):
        ds[last]
    with pytest.raises(FormatError, match=rf"{chunk.name} holds \d+ bytes but index.json records chunk_bytes="):
        list(ds)


# -- reported failure B04 with a real token dataset ------------------------------------------------------


def b04_tokens(i: int) -> torch.Tensor:
    """Array ``i``: 10..19 tokens (a seeded draw), consecutive ids after those of array ``i - 1``."""
    lengths = np.random.RandomState(4).randint(10, 20, size=100)
    start = int(lengths[:i].sum())
    return torch.arange(start, start + int(lengths[i]), dtype=torch.int32)


@pytest.mark.parametrize("shuffle", [False, True])
def test_b04_ranks_get_the_same_number_of_token_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shuffle: bool
) -> None:
    optimize(b04_tokens, range(100), tmp_path, chunk_size=100, item_loader=TokensLoader(), num_workers=1, verbose=False)
    dims = [c["dim"] for c in json.loads((tmp_path / "index.json").read_text())["chunks"]]
    windows = sum(d // 10 for d in dims)
    counts, announced, seen = [], [], []
    monkeypatch.setenv("WORLD_SIZE", "4")
    for rank in range(4):
        monkeypatch.setenv("GLOBAL_RANK", str(rank))
        ds = StreamingDataset(tmp_path, item_loader=TokensLoader(block_size=10), shuffle=shuffle, drop_last=True)
        loader = StreamingDataLoader(ds, batch_size=2, num_workers=1)
        announced.append(len(loader))
        batches = list(loader)
        counts.append(len(batches))
        assert all(tuple(batch.shape) == (2, 10) for batch in batches)
        seen.append({int(w[0]) for batch in batches for w in batch})
    expected = (windows // 2) // 4
    assert counts == announced == [expected] * 4
    assert sum(map(len, seen)) == len(set().union(*seen)) == 4 * 2 * expected
