"""Local ceilings: how fast this machine can deliver a dataset's items with the least possible work.

Each configuration of ``run_all.py`` reports litstream's throughput as a fraction of a ceiling measured
in the same run. The remote ceilings are obstore's GETs alone (``e2e_case.case_raw_download``); the local
ones are here, measured on litstream's own chunk files (the same bytes litstream reads):

* ``columns``: for every chunk, map the file with its pages populated (``MAP_POPULATE``: no page
  faults afterwards), copy its bytes once (the memcpy: one strided copy of every fixed-shape array leaf
  into one new ``(n, *shape)`` array, which is nearly all of the chunk's bytes and the copy a reader
  must make to hand out writable arrays), then the minimal decode of the other leaves, column by column
  with NumPy, knowing the layout in advance: one ``tolist()`` per scalar column, one ``str`` per string.
  No validation, no per-sample object. The ceiling of a batched read (the loader).
* ``samples``: ``columns`` plus one ``dict`` per sample holding its row of each column: the ceiling
  of a per-sample read (``StreamingDataset`` iteration, ``astream``).
* ``tokens``: for every chunk of a token dataset (raw ``no_header_numpy`` items) mapped as above, one
  copy of its tokens as a ``(blocks, block_size)`` array and one row object per block (the items a
  ``TokensLoader`` hands out).

The minimal decode needs items evenly spaced in the chunk (true of the benchmark's data: every sample
has the same size); it raises otherwise rather than measure something else.
"""

from __future__ import annotations

import json
import mmap
import time
from pathlib import Path
from typing import Any

import numpy as np

_SCALARS = {"int": "<i8", "float": "<f8"}


def _chunks(data: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    index = json.loads((Path(data) / "index.json").read_text())
    return index["config"], index["chunks"]


def _map(path: Path) -> mmap.mmap:
    """``path`` mapped read-only with every page populated (one system call, no later page faults)."""
    with path.open("rb") as f:
        return mmap.mmap(f.fileno(), 0, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0),
                         prot=mmap.PROT_READ)  # fmt: skip


def _decode_chunk(raw: mmap.mmap, formats: list[str], per_sample: bool) -> int:
    buf = np.frombuffer(raw, dtype=np.uint8)
    n = int(buf[:4].view("<u4")[0])
    offsets = buf[4 : 4 * (n + 2)].view("<u4").astype(np.int64)
    stride = int(offsets[1] - offsets[0])
    if not bool((np.diff(offsets) == stride).all()):
        raise ValueError("the ceiling's minimal decode needs evenly spaced items")
    grid = buf[int(offsets[0]) : int(offsets[-1])].reshape(n, stride)
    sizes = grid[0, : 4 * len(formats)].view("<u4").astype(np.int64)
    position = 4 * len(formats)
    columns: list[Any] = []
    for fmt, size in zip(formats, sizes.tolist(), strict=True):
        field = grid[:, position : position + size]
        if fmt in _SCALARS:
            columns.append(np.ascontiguousarray(field).view(_SCALARS[fmt]).ravel().tolist())
        elif fmt == "str":
            columns.append([bytes(row).decode() for row in field])
        elif fmt == "numpy":
            words = field[0, :8].view("<u4")
            header = 8 + 4 * int(words[1])
            shape = tuple(field[0, 8:header].view("<u4").tolist())
            array = np.ascontiguousarray(field[:, header:])  # the one copy of the image bytes
            columns.append(list(array.reshape(n, *shape)) if per_sample else array.reshape(n, *shape))
        else:
            raise ValueError(f"the ceiling's minimal decode has no rule for leaves of format {fmt!r}")
        position += size
    if per_sample:
        keys = [f"k{j}" for j in range(len(columns))]
        rows = [dict(zip(keys, values, strict=True)) for values in zip(*columns, strict=True)]
        return len(rows)
    return n


def items_ceiling(data: str, per_sample: bool) -> dict[str, Any]:
    """The ``columns`` / ``samples`` ceiling over a litstream dataset of uncompressed chunks."""
    config, chunks = _chunks(data)
    formats = [str(f).split(":")[0] for f in config["data_format"]]
    start = time.perf_counter()
    items = 0
    for chunk in chunks:
        with _map(Path(data) / chunk["filename"]) as mapped:
            items += _decode_chunk(mapped, formats, per_sample)
    return {"items": items, "seconds": time.perf_counter() - start}


def tokens_ceiling(data: str, block_size: int) -> dict[str, Any]:
    """The ``tokens`` ceiling over a token dataset written by LitData's ``TokensLoader``."""
    config, chunks = _chunks(data)
    from litstream.format._dtypes import torch_dtype_itemsize

    fmt = str(config["data_format"][0])  # "no_header_tensor:<torch dtype index>" (or numpy)
    dtype = np.dtype(f"<i{torch_dtype_itemsize(int(fmt.split(':')[1]))}") if "tensor" in fmt else np.dtype("<i4")
    start = time.perf_counter()
    items = 0
    for chunk in chunks:
        with _map(Path(data) / chunk["filename"]) as mapped:
            buf = np.frombuffer(mapped, dtype=np.uint8)
            n = int(buf[:4].view("<u4")[0])
            tokens = buf[4 * (n + 2) :].view(dtype)
            blocks = len(tokens) // block_size
            items += len(list(tokens[: blocks * block_size].reshape(blocks, block_size).copy()))
            del buf, tokens
    return {"items": items, "seconds": time.perf_counter() - start}


def _write_share(out: str, share: int, workers: int, samples: int) -> int:
    from _e2e_data import make_sample

    written, limit = 0, 64_000_000
    pieces: list[bytes] = []
    size = 0
    with open(Path(out) / f"part-{share}.bin", "wb", buffering=0) as f:
        for i in range(share, samples, workers):
            sample = make_sample(i)
            name = sample["name"].encode()
            pieces += [sample["image"].data, sample["label"].to_bytes(8, "little"), name]
            size += sample["image"].nbytes + 8 + len(name)
            written += 1
            if size >= limit:
                f.write(b"".join(pieces))
                pieces, size = [], 0
        f.write(b"".join(pieces))
    return written


def write_ceiling(out: str, samples: int, workers: int = 2) -> dict[str, Any]:
    """The ``write`` ceiling of ``optimize``: ``workers`` forked processes (as ``optimize`` uses) each
    call the sample function on its share of the inputs and write the leaves' raw bytes to one file in
    64 MB pieces: no serializer headers, no index, no chunk bookkeeping."""
    import multiprocessing

    Path(out).mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        items = sum(pool.starmap(_write_share, [(out, k, workers, samples) for k in range(workers)]))
    return {"items": items, "seconds": time.perf_counter() - start}
