"""LitData's Arrow chunks, both ways: LitData 0.2.76 writes dict samples of JSON-like values as an Arrow
IPC payload (``config.types``, ``ipc_compression``); litstream reads them sample-identical (iteration,
``ds[i]``, a two-worker loader, ``astream`` on asyncio and trio), and writes them with
``optimize(..., chunk_format="arrow")`` so that LitData reads ours the same.

The reference for every read is twofold: what ``fn`` returned (rows lacking a field hold ``None`` there,
as Arrow stores them) and what LitData's own reader returns from the same files.
"""

from __future__ import annotations

import gc
import json
import shutil
from typing import TYPE_CHECKING, Any

import pytest

import litstream
from clean_litdata import litdata_optimize
from peer import litdata_marks, require_peer

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

litdata = require_peer("litdata")

pytestmark = litdata_marks(r"ignore:unclosed file <_io\.FileIO name='[^']*-litdata-copy\d+/:ResourceWarning")

NUM = 700  # with chunk_size=300: chunks of 300, 300, 100 items; a chunk holds two record batches (256 + 44)
CHUNK_SIZE = 300


# -- samples (module level: LitData's forked workers call them) ---------------------------------------


def ints(i: int) -> dict[str, Any]:
    return {"i": i, "neg": -3 * i, "big": 2**40 + i}


def floats(i: int) -> dict[str, Any]:
    return {"i": i, "x": i / 7, "y": -0.5 * i}


def bools(i: int) -> dict[str, Any]:
    return {"i": i, "even": i % 2 == 0, "third": i % 3 == 0}


def strs(i: int) -> dict[str, Any]:
    return {"i": i, "s": f"héllo ✓ 日本 {i}" + "x" * (i % 5), "empty": ""}


def blobs(i: int) -> dict[str, Any]:
    return {"i": i, "b": bytes((i + k) % 256 for k in range(i % 9)), "z": b"\x00\xff"}


def nones(i: int) -> dict[str, Any]:
    return {"i": i, "n": None if i % 3 else i, "always": None, "s": None if i % 2 else f"v{i}"}


def mixed(i: int) -> dict[str, Any]:
    return {
        "i": i,
        "x": i / 4,
        "ok": i % 2 == 1,
        "s": f"t{i}",
        "b": bytes([i % 256]) * (i % 3),
        "n": None if i % 2 else f"v{i}",
        "l": [i, i + 1],
        "ls": [f"a{i}"] * (i % 3),
        "d": {"k": i, "v": [float(i)], "t": {"deep": str(i)}},
    }


def dense(i: int) -> dict[str, Any]:
    """``mixed`` without ``None``: LitData's writers record ``data_format`` from their first sample (``None``
    is ``pickle``) and refuse to merge two workers' indexes that differ, so multi-worker runs use this."""
    sample = mixed(i)
    del sample["n"]
    return sample


def sparse(i: int) -> dict[str, Any]:
    """A field present on odd samples only: LitData stores ``None`` for the others."""
    sample: dict[str, Any] = {"i": i}
    if i % 2:
        sample["extra"] = f"e{i}"
    return sample


SCHEMAS: dict[str, Callable[[int], dict[str, Any]]] = {
    "ints": ints,
    "floats": floats,
    "bools": bools,
    "strs": strs,
    "bytes": blobs,
    "nones": nones,
    "mixed": mixed,
    "sparse": sparse,
}


def expected(fn: Callable[[int], dict[str, Any]], i: int) -> dict[str, Any]:
    """``fn(i)`` as an Arrow row: every field of the schema present, ``None`` where the sample lacks it."""
    sample = fn(i)
    if fn is sparse:
        sample.setdefault("extra", None)
    return sample


def strict(value: Any) -> Any:
    """A comparison key that tells ``1`` from ``1.0`` and ``True`` and ``b""`` from ``""``."""
    if isinstance(value, dict):
        return ("dict", [(k, strict(v)) for k, v in value.items()])
    if isinstance(value, list):
        return ("list", [strict(v) for v in value])
    return (type(value).__name__, value)


def assert_rows(actual: list[Any], wanted: list[Any], what: str) -> None:
    assert len(actual) == len(wanted), f"{what}: {len(actual)} samples != {len(wanted)}"
    for k, (a, w) in enumerate(zip(actual, wanted, strict=True)):
        assert strict(a) == strict(w), f"{what}[{k}]: {a!r} != {w!r}"


def by_i(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(samples, key=lambda s: s["i"])


_copies = 0


def litdata_items(directory: Path) -> list[Any]:
    """LitData's ``ds[i]`` for every i, on a private copy (LitData's reader writes into local datasets)."""
    global _copies
    _copies += 1
    copy = directory.parent / f"{directory.name}-litdata-copy{_copies}"
    shutil.copytree(directory, copy)
    ds = litdata.StreamingDataset(str(copy))
    samples = [ds[i] for i in range(len(ds))]
    del ds
    gc.collect()
    return samples


def _keep(batch: list[Any]) -> list[Any]:
    return batch


# -- LitData writes Arrow, litstream reads -------------------------------------------------------------


CASES = [pytest.param((name, comp), id=f"{name}-{comp or 'raw'}") for name in SCHEMAS for comp in (None, "zstd")]


@pytest.fixture(scope="module", params=CASES)
def litdata_arrow(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    name, compression = request.param
    fn = SCHEMAS[name]
    out = tmp_path_factory.mktemp(f"litdata_arrow_{name}") / "data"
    litdata_optimize(
        fn=fn,
        inputs=list(range(NUM)),
        output_dir=str(out),
        chunk_size=CHUNK_SIZE,
        compression=compression,
        num_workers=1,
        verbose=False,
    )
    return {"dir": out, "fn": fn, "compression": compression, "litdata": litdata_items(out)}


def test_litdata_wrote_arrow_chunks(litdata_arrow: dict[str, Any]) -> None:
    """The fixture really holds Arrow chunks (else these tests would prove nothing)."""
    index = json.loads((litdata_arrow["dir"] / "index.json").read_text())
    config = index["config"]
    assert config["types"]
    assert config["ipc_compression"] == litdata_arrow["compression"]
    assert [c["chunk_size"] for c in index["chunks"]] == [300, 300, 100]
    for chunk in index["chunks"]:
        data = (litdata_arrow["dir"] / chunk["filename"]).read_bytes()
        assert data.endswith(b"LDARW01\0")
        assert len(data) == chunk["chunk_bytes"]


def test_iteration_matches_fn_and_litdata(litdata_arrow: dict[str, Any]) -> None:
    fn = litdata_arrow["fn"]
    ours = list(litstream.StreamingDataset(litdata_arrow["dir"], shuffle=False))
    assert_rows(ours, [expected(fn, i) for i in range(NUM)], "litstream vs fn")
    assert_rows(ours, litdata_arrow["litdata"], "litstream vs LitData")


def test_getitem_every_index(litdata_arrow: dict[str, Any]) -> None:
    fn = litdata_arrow["fn"]
    ds = litstream.StreamingDataset(litdata_arrow["dir"], shuffle=False)
    assert len(ds) == NUM
    ours = [ds[i] for i in range(NUM)]
    assert_rows(ours, [expected(fn, i) for i in range(NUM)], "ds[i] vs fn")
    assert_rows(ours, litdata_arrow["litdata"], "ds[i] vs LitData")
    backwards = [ds[i] for i in reversed(range(NUM))]  # random access across chunks and record batches
    assert_rows(backwards[::-1], ours, "ds[i] backwards")


def test_getitem_returns_fresh_samples(litdata_arrow: dict[str, Any]) -> None:
    ds = litstream.StreamingDataset(litdata_arrow["dir"], shuffle=False)
    first = ds[5]
    first["i"] = -1
    assert ds[5]["i"] == 5


@pytest.mark.parametrize("shuffle", [True, "window"])
def test_shuffled_iteration_serves_every_sample_once(litdata_arrow: dict[str, Any], shuffle: Any) -> None:
    fn = litdata_arrow["fn"]
    ours = list(litstream.StreamingDataset(litdata_arrow["dir"], shuffle=shuffle, seed=3))
    assert [s["i"] for s in ours] != list(range(NUM))
    assert_rows(by_i(ours), [expected(fn, i) for i in range(NUM)], f"shuffle={shuffle!r}")


@pytest.mark.parametrize("num_workers", [0, 2])
def test_loader(litdata_arrow: dict[str, Any], num_workers: int) -> None:
    fn = litdata_arrow["fn"]
    ds = litstream.StreamingDataset(litdata_arrow["dir"], shuffle=False)
    loader = litstream.StreamingDataLoader(ds, batch_size=8, num_workers=num_workers, collate_fn=_keep)
    ours = [sample for batch in loader for sample in batch]
    wanted = [expected(fn, i) for i in range(NUM)]
    if num_workers == 0:
        assert_rows(ours, wanted, "loader")
    else:
        assert_rows(by_i(ours), wanted, f"loader with {num_workers} workers")


@pytest.mark.anyio
async def test_astream(litdata_arrow: dict[str, Any], anyio_backend: str) -> None:
    fn = litdata_arrow["fn"]
    async with litstream.astream(litdata_arrow["dir"]) as samples:
        ours = [sample async for sample in samples]
    assert_rows(ours, [expected(fn, i) for i in range(NUM)], f"astream on {anyio_backend}")


def test_chunk_bytes_and_two_writers(tmp_path: Path) -> None:
    """LitData's chunk_bytes budget and two writer ranks: several uneven chunks, still the same rows."""
    out = tmp_path / "data"
    litdata_optimize(
        fn=dense,
        inputs=list(range(NUM)),
        output_dir=str(out),
        chunk_bytes="8KB",
        compression="zstd",
        num_workers=2,
        verbose=False,
    )
    index = json.loads((out / "index.json").read_text())
    assert len(index["chunks"]) > 4
    ours = list(litstream.StreamingDataset(out, shuffle=False))
    assert_rows(ours, litdata_items(out), "litstream vs LitData")
    assert_rows(by_i(ours), [dense(i) for i in range(NUM)], "litstream vs fn")


# -- litstream writes Arrow, LitData reads ---------------------------------------------------------------


@pytest.mark.parametrize("compression", [None, "zstd"])
@pytest.mark.parametrize("name", ["mixed", "nones", "sparse", "bytes"])
def test_litdata_reads_litstream_arrow(tmp_path: Path, name: str, compression: str | None) -> None:
    fn = SCHEMAS[name]
    out = tmp_path / "ours"
    litstream.optimize(
        fn, list(range(NUM)), out, chunk_size=CHUNK_SIZE, compression=compression, num_workers=1, verbose=False,
        chunk_format="arrow",
    )  # fmt: skip
    wanted = [expected(fn, i) for i in range(NUM)]
    assert_rows(litdata_items(out), wanted, "LitData reads ours")
    assert_rows(list(litstream.StreamingDataset(out, shuffle=False)), wanted, "litstream reads ours")


@pytest.mark.parametrize("compression", [None, "zstd"])
def test_litstream_arrow_chunks_byte_identical_to_litdata(tmp_path: Path, compression: str | None) -> None:
    litstream.optimize(  # checksum=None: the index LitData writes (by default one key per chunk more)
        mixed, list(range(NUM)), tmp_path / "ours", chunk_size=CHUNK_SIZE, compression=compression,
        num_workers=1, verbose=False, chunk_format="arrow", checksum=None,
    )  # fmt: skip
    litdata_optimize(
        fn=mixed, inputs=list(range(NUM)), output_dir=str(tmp_path / "theirs"), chunk_size=CHUNK_SIZE,
        compression=compression, num_workers=1, verbose=False,
    )  # fmt: skip
    ours = json.loads((tmp_path / "ours" / "index.json").read_text())
    theirs = json.loads((tmp_path / "theirs" / "index.json").read_text())
    assert ours["chunks"] == theirs["chunks"]
    assert ours["config"] == theirs["config"]
    for chunk in theirs["chunks"]:
        name = chunk["filename"]
        assert (tmp_path / "ours" / name).read_bytes() == (tmp_path / "theirs" / name).read_bytes(), name


def test_litstream_arrow_two_workers(tmp_path: Path) -> None:
    out = tmp_path / "ours"
    litstream.optimize(dense, list(range(NUM)), out, chunk_size=128, num_workers=2, verbose=False, chunk_format="arrow")
    wanted = [dense(i) for i in range(NUM)]
    assert_rows(litdata_items(out), wanted, "LitData reads ours")
    ds = litstream.StreamingDataset(out, shuffle=False)
    assert_rows([ds[i] for i in range(len(ds))], wanted, "litstream ds[i]")
