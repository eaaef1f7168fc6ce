"""Fuzzing ``index.json`` and chunk bytes (plain and zstd) through every read path.

Every outcome must be data (the samples, or samples of the recorded shape where bytes inside a payload
changed: the format carries no checksum) or a :class:`~litstream.LitstreamError` subclass; nothing hangs
(pytest-timeout) and the traced peak memory stays under a bound set by the dataset's real size, whatever
sizes the index claims.

CI runs ``FUZZ_EXAMPLES`` examples per test (default 120, about a minute). For a long run:
``LITSTREAM_FUZZ_EXAMPLES=1000 pytest tests/read/test_fuzz.py``.
"""

from __future__ import annotations

import copy
import json
import os
import struct
import tempfile
import tracemalloc
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataset_files import data_files
from hostile import write_dataset
from litstream import FormatError, LitstreamError, StreamingDataset, astream
from litstream.format._compression import compress, decompress

if TYPE_CHECKING:
    from collections.abc import Callable

FUZZ_EXAMPLES = int(os.environ.get("LITSTREAM_FUZZ_EXAMPLES", "120"))
PEAK_LIMIT = 32 * 2**20
"""Bytes of traced memory one example may reach: the dataset is a few KiB; the index may claim TiBs."""

FUZZ = settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)


def _sample(i: int) -> dict[str, Any]:
    return {
        "i": i,
        "f": i / 3,
        "s": f"item-{i}-" + "é" * (i % 3),
        "b": bytes(range(i % 7)),
        "m": np.arange(6, dtype=np.int16).reshape(2, 3) + i,
        "v": np.full(i % 4 + 1, i, dtype=np.float32),
        "ok": i % 2 == 0,
    }


SAMPLES = [_sample(i) for i in range(12)]
KINDS = {"i": int, "f": float, "s": str, "b": bytes, "m": np.ndarray, "v": np.ndarray, "ok": bool}


def _same(a: Any, b: Any) -> bool:
    if a.keys() != b.keys():
        return False
    return all(np.array_equal(a[k], b[k]) if isinstance(a[k], np.ndarray) else a[k] == b[k] for k in a)


def _shaped(sample: Any) -> bool:
    """A sample of the recorded structure and leaf types (values may differ: payload bytes changed)."""
    return (
        isinstance(sample, dict)
        and list(sample) == list(KINDS)
        and all(isinstance(sample[k], kind) for k, kind in KINDS.items())
    )


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> dict[str | None, tuple[Path, dict[str, Any]]]:
    out: dict[str | None, tuple[Path, dict[str, Any]]] = {}
    for compression in (None, "zstd"):
        d = tmp_path_factory.mktemp(f"fuzz-{compression}")
        out[compression] = (d, write_dataset(d, SAMPLES, chunk_size=4, compression=compression))
    return out


async def _astream_all(d: Path) -> list[Any]:
    async with astream(d, max_pre_download=3) as samples:
        return [s async for s in samples]


def _read(d: Path) -> list[tuple[str, Any]]:
    """Each read path's outcome: ``("data", samples)`` or ``("error", LitstreamError)``; anything else raises."""
    outcomes: list[tuple[str, Any]] = []

    def items() -> list[Any]:
        ds = StreamingDataset(d)
        total = len(ds)  # an index may record fewer items: ds[i] past the end is an IndexError, as it should be
        return [ds[i] for i in (0, 5, 11) if i < total]

    calls: list[Callable[[], list[Any]]] = [
        lambda: list(StreamingDataset(d)),
        items,
        lambda: anyio.run(_astream_all, d),
    ]
    for call in calls:
        try:
            outcomes.append(("data", call()))
        except LitstreamError as exc:
            outcomes.append(("error", exc))
    return outcomes


def _measured(d: Path) -> tuple[list[tuple[str, Any]], int]:
    """The outcomes of :func:`_read` and the traced peak memory it added (above what was traced before)."""
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    outcomes = _read(d)
    return outcomes, tracemalloc.get_traced_memory()[1] - before


@pytest.fixture(scope="module", autouse=True)
def _traced() -> Any:
    tracemalloc.start()
    yield
    tracemalloc.stop()


# --- index.json -------------------------------------------------------------------------------------

HOSTILE_STRINGS = [
    "../outside.bin", "/etc/passwd", "sub/../../x", "C:\\x", ".locks/x", "index.json", "", "\x00", "zstd",
    "zstd:99", "pickle", "no_header_numpy:999", "numpy", "[1, {}]", "null", "PyTreeLoader", "TokensLoader",
    "chunk", "batch", "é" * 300, "1" * 5000,
]  # fmt: skip
BOUNDARY_INTS = [0, 1, -1, 2, 3, 4, 7, 12, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**40, 2**63 - 1, 2**63, 2**64, 10**30]

json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from(BOUNDARY_INTS),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(HOSTILE_STRINGS),
    st.text(max_size=12),
)
json_value = st.recursive(
    json_leaf,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


def _slots(obj: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path (keys / indexes) into ``obj``, the root excluded."""
    found: list[tuple[Any, ...]] = []
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list) else ()
    for key, value in items:
        found.append((*path, key))
        found.extend(_slots(value, (*path, key)))
    return found


def _parent(obj: Any, path: tuple[Any, ...]) -> Any:
    for key in path[:-1]:
        obj = obj[key]
    return obj


def _mutate(data: st.DataObject, original: dict[str, Any]) -> str:
    obj = copy.deepcopy(original)
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        slots = _slots(obj)
        op = data.draw(st.sampled_from(["replace", "delete", "insert", "int", "spec", "text"]), label="op")
        if op == "text":  # damage the serialized text itself
            text = json.dumps(obj)
            cut = data.draw(st.integers(0, len(text)), label="cut")
            junk = data.draw(st.sampled_from(["", "}", "]", ",", '"', "\\", "\x00", "é", "{" * 5000]), label="junk")
            return text[:cut] + junk + text[cut + 1 :]
        if not slots:
            continue
        path = data.draw(st.sampled_from(slots), label="path")
        parent = _parent(obj, path)
        if op == "replace":
            parent[path[-1]] = data.draw(json_value, label="value")
        elif op == "delete":
            del parent[path[-1]]
        elif op == "insert":
            value = data.draw(json_value, label="value")
            if isinstance(parent, list):
                parent.insert(path[-1], value)
            else:
                parent[data.draw(st.text(max_size=6), label="key")] = value
        elif op == "int":  # a size field set to a boundary value
            chunk = data.draw(st.sampled_from(obj["chunks"]), label="chunk") if obj.get("chunks") else None
            if isinstance(chunk, dict):
                key = data.draw(st.sampled_from(["chunk_size", "chunk_bytes", "dim"]), label="key")
                chunk[key] = data.draw(st.sampled_from(BOUNDARY_INTS), label="int")
        elif op == "spec" and isinstance(obj.get("config"), dict):  # a damaged data_spec string
            spec = str(obj["config"].get("data_spec"))
            cut = data.draw(st.integers(0, len(spec)), label="cut")
            piece = data.draw(st.sampled_from(["", "1", "null", "[]", "{}", '"x"', "-1", "[[[[", "9" * 40]))
            obj["config"]["data_spec"] = spec[:cut] + piece + spec[cut + 1 :]
    return json.dumps(obj)


def _copy_of(source: Path, root: str) -> Path:
    target = Path(root) / "ds"
    target.mkdir()
    for file in data_files(source):
        os.link(file, target / file.name)
    return target


@pytest.mark.timeout(900)
@FUZZ
@given(data=st.data())
def test_mutated_indexes_give_data_or_a_litstream_error(
    datasets: dict[str | None, tuple[Path, dict[str, Any]]], data: st.DataObject
) -> None:
    source, original = datasets[None]
    text = _mutate(data, original)
    with tempfile.TemporaryDirectory() as root:
        d = _copy_of(source, root)
        (d / "index.json").unlink()
        (d / "index.json").write_text(text, encoding="utf-8", errors="surrogatepass")
        outcomes, peak = _measured(d)
    assert peak < PEAK_LIMIT, f"peak {peak} bytes"
    for kind, value in outcomes:
        if kind == "data":  # the index decides what the bytes mean (e.g. int read as float): any sample
            assert isinstance(value, list)


# --- chunk bytes ------------------------------------------------------------------------------------


def _damage(data: st.DataObject, raw: bytes) -> bytes:
    buf = bytearray(raw)
    for _ in range(data.draw(st.integers(1, 4), label="edits")):
        op = data.draw(st.sampled_from(["flip", "u32", "cut", "grow"]), label="op")
        if op == "cut":
            buf = buf[: data.draw(st.integers(0, len(buf)), label="cut")]
        elif op == "grow":
            buf += data.draw(st.binary(min_size=1, max_size=64), label="tail")
        elif buf and op == "flip":
            at = data.draw(st.integers(0, len(buf) - 1), label="at")
            buf[at] ^= data.draw(st.integers(1, 255), label="mask")
        elif len(buf) >= 4:  # a header word (count or offset) set to a boundary value
            at = data.draw(st.integers(0, min(len(buf), 64) - 4), label="at") // 4 * 4
            value = data.draw(st.sampled_from([0, 1, 2**31, 2**32 - 1, len(buf), len(buf) + 1]), label="u32")
            buf[at : at + 4] = struct.pack("<I", value % 2**32)
    return bytes(buf)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("compression", [None, "zstd"])
@FUZZ
@given(data=st.data())
def test_mutated_chunks_give_data_or_a_litstream_error(
    datasets: dict[str | None, tuple[Path, dict[str, Any]]], compression: str | None, data: st.DataObject
) -> None:
    source, original = datasets[compression]
    name = data.draw(st.sampled_from([c["filename"] for c in original["chunks"]]), label="chunk")
    stored = (source / name).read_bytes()
    inner = compression is not None and data.draw(st.booleans(), label="inside the frame")
    if inner:  # damage the chunk, then compress it properly: the parser behind the decompressor
        damaged = compress(_damage(data, decompress(stored, "zstd")), "zstd")
    else:
        damaged = _damage(data, stored)
    with tempfile.TemporaryDirectory() as root:
        d = _copy_of(source, root)
        (d / name).unlink()
        (d / name).write_bytes(damaged)
        outcomes, peak = _measured(d)
    assert peak < PEAK_LIMIT + 8 * len(damaged), f"peak {peak} bytes"
    for kind, value in outcomes:
        if kind == "data":
            expected = SAMPLES if len(value) == len(SAMPLES) else [SAMPLES[i] for i in (0, 5, 11)]
            assert len(value) == len(expected)
            # equal where the damage missed the items; else samples of the recorded shape (no checksum)
            assert all(_same(got, want) or _shaped(got) for got, want in zip(value, expected, strict=True))
    if damaged == stored:
        assert all(kind == "data" for kind, _ in outcomes)


def test_a_huge_claimed_chunk_allocates_nothing(tmp_path: Path) -> None:
    d = tmp_path / "ds"
    obj = write_dataset(d, SAMPLES, chunk_size=4)
    for claim in (2**21, 2**32 - 3):  # consistent with each other, not with the 1 KiB file
        obj["chunks"][1]["chunk_size"] = claim
        obj["chunks"][1]["chunk_bytes"] = 4 * (claim + 2)
        (d / "index.json").write_text(json.dumps(obj))
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        with pytest.raises(FormatError, match=r"chunks\[1\] records chunk_bytes=\d+ but chunk-0-1\.bin holds"):
            list(StreamingDataset(d))
        assert tracemalloc.get_traced_memory()[1] - before < 16 * 2**20
    obj["chunks"][1]["chunk_size"] = 2**40  # beyond a uint32 item count
    (d / "index.json").write_text(json.dumps(obj))
    with pytest.raises(FormatError, match=r"chunks\[1\]\.chunk_size=1099511627776 is outside \[0, 4294967295\]"):
        StreamingDataset(d)[0]


@pytest.mark.parametrize("end", [2**31, 2**32 - 1, 5])
def test_a_damaged_item_offset_allocates_nothing(tmp_path: Path, end: int) -> None:
    d = tmp_path / "ds"
    write_dataset(d, SAMPLES, chunk_size=4)
    chunk = bytearray((d / "chunk-0-1.bin").read_bytes())
    chunk[12:16] = struct.pack("<I", end)  # offsets[2]: the end of item 1, the start of item 2
    (d / "chunk-0-1.bin").write_bytes(bytes(chunk))
    tracemalloc.reset_peak()
    before = tracemalloc.get_traced_memory()[0]
    with pytest.raises(FormatError, match=r"item at offset 8 spans bytes \[\d+, \d+\) but the file holds"):
        StreamingDataset(d)[5]  # ds[i] reads the two offsets, then the bytes between them
    with pytest.raises(FormatError, match=r"item 1 spans bytes"):
        list(StreamingDataset(d))
    assert tracemalloc.get_traced_memory()[1] - before < 16 * 2**20
