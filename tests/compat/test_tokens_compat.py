"""TokensLoader interoperability with LitData 0.2.71 (the test peer).

* Both libraries write the same token arrays byte-identically (chunks and ``index.json``).
* LitData writes (2 workers, raw and zstd), litstream reads: the same ``block_size`` windows in the
  same order (``shuffle`` False and True, several ranks, ``drop_last``), the same ``len`` and ``ds[i]``.
* litstream writes, LitData reads: the same windows again.
* The same order through the DataLoaders with 2 workers each.

Token arrays hold consecutive ids (array ``i`` = ``BASE[i] .. BASE[i] + LENGTHS[i] - 1``), so a window
shows exactly which tokens it covers. LitData's optimize runs with ``start_method="fork"`` (in a clean
process: ``tests/clean_litdata.py``) and ``LITDATA_POSIX_FAST=0`` keeps its FullShuffle on a local disk.
LitData reads its own copy of a dataset (its reader deletes compressed chunks after decompressing them).
"""

from __future__ import annotations

import gc
import json
import re
import shutil
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import torch
import zstandard

import litstream
from clean_litdata import litdata_optimize
from dataset_files import in_version_log
from peer import litdata_marks, peer_workers, require_peer

if TYPE_CHECKING:
    from pathlib import Path

litdata = require_peer("litdata")
litdata_env = require_peer("litdata.utilities.env")

pytestmark = litdata_marks(r"ignore:unclosed file <_io\.FileIO name=.*chunk-:ResourceWarning")

NUM_ARRAYS = 23
LENGTHS = [5 + (7 * i) % 19 for i in range(NUM_ARRAYS)]  # 5..23 tokens, uneven
BASE = [sum(LENGTHS[:i]) for i in range(NUM_ARRAYS)]
TOTAL = sum(LENGTHS)
CHUNK_TOKENS = 60


# -- samples (module level: LitData's workers import them) -------------------------------------------


def numpy_tokens(i: int) -> np.ndarray:
    return np.arange(BASE[i], BASE[i] + LENGTHS[i], dtype=np.int32)


def uint16_tokens(i: int) -> np.ndarray:
    return np.arange(BASE[i], BASE[i] + LENGTHS[i], dtype=np.uint16)


def some_empty_tokens(i: int) -> np.ndarray:
    """Every fifth array (from the fourth on) holds no token."""
    return numpy_tokens(i)[: 0 if i % 5 == 3 else None]


def tensor_tokens(i: int) -> torch.Tensor:
    return torch.arange(BASE[i], BASE[i] + LENGTHS[i], dtype=torch.int64)


# -- helpers ------------------------------------------------------------------------------------------

_copies = 0


def _litdata_copy(directory: Path) -> Path:
    global _copies
    _copies += 1
    target = directory.parent / f"{directory.name}-litdata-copy{_copies}"
    shutil.copytree(directory, target)
    return target


def _lists(windows: list[Any]) -> list[list[int]]:
    return [w.tolist() for w in windows]


def _litdata_dataset(directory: Path, block_size: int, **kwargs: Any) -> Any:
    return litdata.StreamingDataset(
        str(_litdata_copy(directory)), item_loader=litdata.TokensLoader(block_size=block_size), **kwargs
    )


def _ours(directory: Path, block_size: int, **kwargs: Any) -> litstream.StreamingDataset:
    return litstream.StreamingDataset(directory, item_loader=litstream.TokensLoader(block_size=block_size), **kwargs)


def _expected_windows(directory: Path, block_size: int) -> list[list[int]]:
    """Windows in index order, from the raw chunk files: each chunk's tokens (after its header) cut
    into whole blocks, the tail dropped."""
    index = json.loads((directory / "index.json").read_text())
    compression = index["config"]["compression"]
    dtype = np.int64 if index["config"]["data_format"][0].startswith("no_header_tensor") else np.int32
    out = []
    for chunk in index["chunks"]:
        data = (directory / chunk["filename"]).read_bytes()
        if compression:
            data = zstandard.ZstdDecompressor().decompress(data)
        tokens = np.frombuffer(data, dtype=dtype, offset=4 * (chunk["chunk_size"] + 2)).tolist()
        assert len(tokens) == chunk["dim"]
        out += [tokens[b * block_size : (b + 1) * block_size] for b in range(chunk["dim"] // block_size)]
    return out


@pytest.fixture(autouse=True)
def _no_posix_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LITDATA_POSIX_FAST", "0")
    for name in ("WORLD_SIZE", "GLOBAL_RANK", "RANK"):
        monkeypatch.delenv(name, raising=False)


# -- 1. byte identity ---------------------------------------------------------------------------------

_TIME = re.compile(r'"updated_at": "[^"]*"')


@pytest.mark.parametrize(
    ("fn", "data_format", "chunking"),
    [
        pytest.param(numpy_tokens, "no_header_numpy:2", {"chunk_size": CHUNK_TOKENS}, id="int32-chunk_size"),
        pytest.param(uint16_tokens, "no_header_numpy:5", {"chunk_bytes": 90}, id="uint16-chunk_bytes"),
        pytest.param(tensor_tokens, "no_header_tensor:18", {"chunk_size": CHUNK_TOKENS}, id="int64-tensor"),
    ],
)
def test_token_layout_is_byte_identical_to_litdata(
    fn: Any, data_format: str, chunking: dict[str, Any], tmp_path: Path
) -> None:
    inputs = list(range(NUM_ARRAYS))
    litdata_optimize(
        fn=fn,
        inputs=inputs,
        output_dir=str(tmp_path / "litdata"),
        item_loader=litdata.TokensLoader(),
        num_workers=1,
        verbose=False,
        **chunking,
    )
    litstream.optimize(  # checksum=None: byte for byte what LitData writes (the default adds an index key per chunk)
        fn, inputs, tmp_path / "ours", item_loader=litstream.TokensLoader(), num_workers=1, verbose=False,
        checksum=None, **chunking,
    )  # fmt: skip
    theirs = {p.name: p.read_bytes() for p in (tmp_path / "litdata").iterdir()}
    ours = {p.name: p.read_bytes() for p in (tmp_path / "ours").iterdir() if not in_version_log(p.name)}
    assert sorted(ours) == sorted(theirs)
    assert _TIME.sub("", ours.pop("index.json").decode()) == _TIME.sub("", theirs.pop("index.json").decode())
    assert ours == theirs
    index = json.loads((tmp_path / "ours" / "index.json").read_text())
    assert index["config"]["item_loader"] == "TokensLoader"
    assert index["config"]["data_format"] == [data_format]
    assert sum(c["dim"] for c in index["chunks"]) == TOTAL
    assert sum(c["chunk_size"] for c in index["chunks"]) == NUM_ARRAYS
    if "chunk_size" in chunking:
        assert all(c["dim"] <= CHUNK_TOKENS for c in index["chunks"])


def test_empty_arrays_differ_from_litdata_on_purpose(tmp_path: Path) -> None:
    """LitData's writer treats an item of 0 bytes as missing (its ``Item`` has ``__len__`` = bytes), so
    after the first empty array it never closes a chunk again and writes one oversize chunk (quirk).
    litstream keeps the token budget (an empty array counts 1, as LitData's rule says). Each library
    reads the other's output with the same windows."""
    inputs = list(range(NUM_ARRAYS))
    kwargs: dict[str, Any] = {"chunk_size": CHUNK_TOKENS, "num_workers": 1, "verbose": False}
    litdata_optimize(
        fn=some_empty_tokens,
        inputs=inputs,
        output_dir=str(tmp_path / "litdata"),
        item_loader=litdata.TokensLoader(),
        **kwargs,
    )
    litstream.optimize(some_empty_tokens, inputs, tmp_path / "ours", item_loader=litstream.TokensLoader(), **kwargs)
    total = sum(len(some_empty_tokens(i)) for i in inputs)
    their_chunks = json.loads((tmp_path / "litdata" / "index.json").read_text())["chunks"]
    our_chunks = json.loads((tmp_path / "ours" / "index.json").read_text())["chunks"]
    assert [(c["chunk_size"], c["dim"]) for c in their_chunks] == [(NUM_ARRAYS, total)]
    assert all(c["dim"] <= CHUNK_TOKENS for c in our_chunks)
    assert sum(c["dim"] for c in our_chunks) == total
    assert sum(c["chunk_size"] for c in our_chunks) == NUM_ARRAYS
    for directory in (tmp_path / "litdata", tmp_path / "ours"):
        theirs_ds = _litdata_dataset(directory, 6)
        theirs = _lists(list(theirs_ds))
        del theirs_ds
        gc.collect()
        assert _lists(list(_ours(directory, 6))) == theirs == _expected_windows(directory, 6)


# -- 2. LitData writes, litstream reads ---------------------------------------------------------------


@pytest.fixture(scope="module", params=[None, "zstd"], ids=["raw", "zstd"])
def litdata_tokens(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("litdata_tokens") / "data"
    litdata_optimize(
        fn=tensor_tokens,
        inputs=list(range(NUM_ARRAYS)),
        output_dir=str(out),
        item_loader=litdata.TokensLoader(),
        chunk_size=CHUNK_TOKENS,
        compression=request.param,
        # LitData 0.2.76 defaults zstd to framed "batch" chunks, which it refuses for TokensLoader
        **({"compression_level": "chunk"} if request.param else {}),
        num_workers=2,
        verbose=False,
    )
    return out


@pytest.mark.parametrize("block_size", [7, 16])
@pytest.mark.parametrize("shuffle", [False, True])
def test_litstream_reads_litdata_tokens(litdata_tokens: Path, block_size: int, shuffle: bool) -> None:
    theirs_ds = _litdata_dataset(litdata_tokens, block_size, shuffle=shuffle)
    theirs = _lists(list(theirs_ds))
    their_len = len(theirs_ds)
    # LitData's own random access into zstd token chunks intermittently fails with a KeyError in its
    # chunk bookkeeping (litdata/streaming/item_loader.py), so for compressed data litstream's ds[i]
    # is compared with the windows decoded straight from the chunk files instead.
    compressed = json.loads((litdata_tokens / "index.json").read_text())["config"]["compression"] is not None
    their_items = None if compressed else _lists([theirs_ds[i] for i in range(their_len)])
    del theirs_ds
    gc.collect()

    ours_ds = _ours(litdata_tokens, block_size, shuffle=shuffle)
    ours = list(ours_ds)
    assert all(isinstance(w, torch.Tensor) and w.dtype == torch.int64 and w.shape == (block_size,) for w in ours)
    assert len(ours_ds) == their_len == len(theirs)
    assert _lists(ours) == theirs
    expected = _expected_windows(litdata_tokens, block_size)
    assert _lists([ours_ds[i] for i in range(len(ours_ds))]) == expected
    if their_items is not None:
        assert their_items == expected
    if not shuffle:
        assert theirs == expected
    else:
        assert sorted(theirs) == sorted(expected)
        assert theirs != expected


@pytest.mark.parametrize(("drop_last", "epoch"), [(True, 1), (False, 2)])
def test_ranks_and_epochs_match_litdata(
    litdata_tokens: Path, drop_last: bool, epoch: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two ranks, batch size 3, FullShuffle: every rank serves LitData's windows in LitData's order."""
    world, batch, block = 2, 3, 9
    monkeypatch.setenv("WORLD_SIZE", str(world))
    for rank in range(world):
        monkeypatch.setenv("GLOBAL_RANK", str(rank))
        theirs_ds = _litdata_dataset(litdata_tokens, block, shuffle=True, drop_last=drop_last, seed=7)
        theirs_ds.set_batch_size(batch)
        theirs_ds.set_num_workers(1)
        theirs_ds.set_epoch(epoch)
        theirs = _lists(list(theirs_ds))
        their_len = theirs_ds.get_len(1, batch)
        del theirs_ds
        gc.collect()

        ours_ds = _ours(litdata_tokens, block, shuffle=True, drop_last=drop_last, seed=7)
        ours_ds.set_batch_size(batch)
        ours_ds.set_epoch(epoch)
        assert len(ours_ds) == their_len == len(theirs)
        assert _lists(list(ours_ds)) == theirs, f"rank {rank}"


@pytest.mark.slow
def test_dataloaders_with_two_workers_match_litdata(litdata_tokens: Path) -> None:
    block, batch = 8, 4
    their_loader = litdata.StreamingDataLoader(
        _litdata_dataset(litdata_tokens, block, shuffle=True), batch_size=batch, **peer_workers(2)
    )
    theirs = [b.tolist() for b in their_loader]
    del their_loader
    gc.collect()
    our_loader = litstream.StreamingDataLoader(
        _ours(litdata_tokens, block, shuffle=True), batch_size=batch, num_workers=2
    )
    ours = [b.tolist() for b in our_loader]
    assert ours == theirs
    assert sorted(w for b in ours for w in b) == sorted(_expected_windows(litdata_tokens, block))


# -- 3. litstream writes, LitData reads ---------------------------------------------------------------


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_litdata_reads_litstream_tokens(tmp_path: Path, compression: str | None) -> None:
    out = tmp_path / "ours"
    litstream.optimize(
        numpy_tokens,
        list(range(NUM_ARRAYS)),
        out,
        item_loader=litstream.TokensLoader(),
        chunk_size=CHUNK_TOKENS,
        compression=compression,
        num_workers=2,
        verbose=False,
    )
    block = 11
    expected = _expected_windows(out, block)
    for shuffle in (False, True):
        theirs_ds = _litdata_dataset(out, block, shuffle=shuffle)
        theirs = list(theirs_ds)
        their_items = _lists([theirs_ds[i] for i in range(len(theirs_ds))])
        del theirs_ds
        gc.collect()
        assert all(isinstance(w, np.ndarray) and w.dtype == np.int32 for w in theirs)
        ours = list(_ours(out, block, shuffle=shuffle))
        assert all(isinstance(w, np.ndarray) and w.dtype == np.int32 for w in ours)
        assert _lists(ours) == _lists(theirs)
        assert their_items == expected
        assert (_lists(ours) == expected) is (not shuffle)
