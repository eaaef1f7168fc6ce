"""optimize's default layout (``chunk_format=None``) follows LitData 0.2.76's writer: dict samples of JSON-like
values become Arrow rows (the issue-30 scalar rows read several times faster so), anything else stays pytree.

Every read face must return what the pytree layout returned for the same samples, value for value and type
for type; the fallback rules (first sample, a later sample, compression, ``chunk_format="pytree"``) are
checked on the chunk files themselves (an Arrow chunk ends with LitData's footer magic).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

import litstream
from litstream import FormatError, WorkerError

if TYPE_CHECKING:
    from pathlib import Path

NUM = 300
MAGIC = b"LDARW01\0"


def row(i: int) -> dict[str, Any]:
    """The issue's scalar row plus every other JSON-like kind the pytree layout takes in a fixed structure."""
    return {
        "i": i,
        "s": f"s{i} ✓",
        "x": i / 3,
        "ok": i % 2 == 0,
        "b": bytes([i % 256]) * (i % 3),
        "n": None,
        "l": [i, i + 1],
        "d": {"k": i, "t": str(i)},
    }


def strict(value: Any) -> Any:
    """A comparison key telling ``1`` from ``1.0`` and ``True``, ``b""`` from ``""``, tuples from lists."""
    if isinstance(value, dict):
        return ("dict", sorted((k, strict(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [strict(v) for v in value])
    return (type(value).__name__, value)


def layouts(directory: Path) -> list[str]:
    """``"arrow"`` or ``"pytree"`` for each chunk file, in name order."""
    files = sorted(p for p in directory.iterdir() if p.name.startswith("chunk-"))
    return ["arrow" if p.read_bytes()[-8:] == MAGIC else "pytree" for p in files]


def _keep(batch: list[Any]) -> list[Any]:
    return batch


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = {}
    for name, fmt in (("default", None), ("pytree", "pytree")):
        out[name] = tmp_path_factory.mktemp(name)
        litstream.optimize(
            row, list(range(NUM)), out[name], chunk_size=64, num_workers=1, chunk_format=fmt, verbose=False
        )
    return out


def test_default_writes_arrow_rows_and_pytree_on_request(written: dict[str, Path]) -> None:
    assert layouts(written["default"]) == ["arrow"] * 5
    assert layouts(written["pytree"]) == ["pytree"] * 5


def _read(face: str, directory: Path) -> list[Any]:
    if face == "dataset":
        return list(litstream.StreamingDataset(directory))
    if face == "getitem":
        ds = litstream.StreamingDataset(directory)
        return [ds[i] for i in range(len(ds))]
    if face.startswith("loader"):
        ds = litstream.StreamingDataset(directory)
        loader = litstream.StreamingDataLoader(ds, batch_size=16, num_workers=int(face[-1]), collate_fn=_keep)
        return sorted((s for batch in loader for s in batch), key=lambda s: s["i"])
    assert face == "combined"
    combined = litstream.CombinedStreamingDataset([litstream.StreamingDataset(directory)], iterate_over_all=True)
    return list(combined)


@pytest.mark.parametrize("face", ["dataset", "getitem", "loader0", "loader2", "combined"])
def test_every_face_reads_what_the_pytree_layout_gave(written: dict[str, Path], face: str) -> None:
    wanted = [strict(row(i)) for i in range(NUM)]
    before = [strict(s) for s in _read(face, written["pytree"])]
    now = [strict(s) for s in _read(face, written["default"])]
    assert before == wanted
    assert now == wanted


@pytest.mark.anyio
async def test_astream_reads_what_the_pytree_layout_gave(written: dict[str, Path], anyio_backend: str) -> None:
    got = {}
    for name, directory in written.items():
        async with litstream.astream(directory) as samples:
            got[name] = [strict(s) async for s in samples]
    assert got["default"] == got["pytree"] == [strict(row(i)) for i in range(NUM)], anyio_backend


def _write(tmp_path: Path, fn: Any, **kwargs: Any) -> Path:
    out = tmp_path / "out"
    litstream.optimize(fn, list(range(NUM)), out, num_workers=1, verbose=False, **{"chunk_size": 64, **kwargs})
    return out


def with_array(i: int) -> dict[str, Any]:
    return {"i": i, "a": np.arange(3) + i}


def a_number(i: int) -> int:
    return i


def empty(i: int) -> dict[str, Any]:
    return {}


@pytest.mark.parametrize("fn", [with_array, a_number, empty], ids=["ndarray-field", "not-a-dict", "empty-dict"])
def test_samples_arrow_cannot_hold_from_the_first_stay_pytree(tmp_path: Path, fn: Any) -> None:
    out = _write(tmp_path, fn)
    assert layouts(out) == ["pytree"] * 5
    got = list(litstream.StreamingDataset(out))
    assert len(got) == NUM
    if fn is with_array:
        assert [s["i"] for s in got] == list(range(NUM))
        assert all(np.array_equal(s["a"], np.arange(3) + i) for i, s in enumerate(got))
    else:
        assert [strict(s) for s in got] == [strict(fn(i)) for i in range(NUM)]


def int_then_float_lists(i: int) -> dict[str, Any]:
    """Lists of ints, then (from sample 150) of floats: LitData fuses the field to "json", no Arrow column."""
    return {"i": i, "l": [i] if i < 150 else [i + 0.5]}


def test_a_later_sample_arrow_cannot_hold_switches_to_pytree(tmp_path: Path) -> None:
    out = _write(tmp_path, int_then_float_lists)
    # chunks of 64: rows 0-127 were written as Arrow; the open chunk (128-191) and the rest become pytree
    assert layouts(out) == ["arrow", "arrow", "pytree", "pytree", "pytree"]
    got = list(litstream.StreamingDataset(out))
    assert [strict(s) for s in got] == [strict(int_then_float_lists(i)) for i in range(NUM)]
    index = litstream.StreamingDataset(out)
    assert len(index) == NUM


def none_then_str(i: int) -> dict[str, Any]:
    """An int field that is ``None`` in sample 70 and a str from sample 100 on: the pytree layout refuses
    sample 70; the default takes it as an Arrow row, but the str forces pytree, whose format (fixed by the
    first sample, as in a pytree-only run) refuses it: the run fails either way."""
    return {"a": None if i == 70 else (str(i) if i >= 100 else i)}


@pytest.mark.parametrize("fmt", [None, "pytree"])
def test_a_sample_the_pytree_layout_refuses_is_refused_after_a_switch(tmp_path: Path, fmt: str | None) -> None:
    with pytest.raises(WorkerError) as info:
        _write(tmp_path, none_then_str, chunk_size=200, chunk_format=fmt)
    assert isinstance(info.value.__cause__, FormatError)
    assert "the 'int' format fixed by the first sample cannot store" in str(info.value)


def test_compressed_or_forced_pytree_runs_keep_the_pytree_layout(tmp_path: Path) -> None:
    out = _write(tmp_path, row, compression="zstd")
    names = sorted(p.name for p in out.iterdir() if p.name.startswith("chunk-"))
    assert names == [f"chunk-0-{n}.zstd.bin" for n in range(5)]
    assert [strict(s) for s in litstream.StreamingDataset(out)] == [strict(row(i)) for i in range(NUM)]


def test_dataset_update_rewrites_a_chunk_of_arrow_rows(tmp_path: Path) -> None:
    out = tmp_path / "out"
    litstream.optimize(row, list(range(NUM)), out, chunk_size=64, num_workers=1, key_fn=lambda s: s["i"], verbose=False)
    assert layouts(out) == ["arrow"] * 5
    new = {**row(70), "s": "changed", "l": [7, 7, 7]}
    litstream.dataset_update(out, {70: new})
    ds = litstream.StreamingDataset(out)
    assert strict(ds[70]) == strict(new)
    assert strict(ds.get_by_key(70)) == strict(new)  # keyed reads of Arrow rows, one key and several
    assert [strict(s) for s in ds.get_by_keys([3, 70, 299])] == [strict(row(3)), strict(new), strict(row(299))]
    assert [strict(ds[i]) for i in range(NUM) if i != 70] == [strict(row(i)) for i in range(NUM) if i != 70]
    with pytest.raises(FormatError):
        litstream.dataset_update(out, {71: {**row(71), "x": "not a float"}})
    assert strict(litstream.StreamingDataset(out)[71]) == strict(row(71))


def with_bytearray(i: int) -> dict[str, Any]:
    return {"i": i, "x": bytearray(b"ab")}


def test_a_bytearray_is_stored_as_bytes_in_arrow_rows_not_pickled(tmp_path: Path) -> None:
    """As LitData: Arrow rows hold a bytearray as bytes (the pytree layout pickles it, so allow_pickle=False
    refused it there: tests/read/test_pickle_refusal.py); nothing is pickled, so nothing is refused."""
    out = _write(tmp_path, with_bytearray, allow_pickle=False)
    assert layouts(out) == ["arrow"] * 5
    assert [strict(s) for s in litstream.StreamingDataset(out)] == [strict({"i": i, "x": b"ab"}) for i in range(NUM)]


FLAG = "LITSTREAM_TEST_DEFAULT_LAYOUT_FAIL"


def row_failing_once(i: int) -> dict[str, Any]:
    if i == 7 and os.environ.get(FLAG) and os.path.exists(os.environ[FLAG]):
        os.remove(os.environ[FLAG])
        raise RuntimeError("transient")
    return row(i)


def key_of_row(sample: dict[str, Any]) -> int:
    return int(sample["i"])


def test_checkpoint_resume_with_keys_over_arrow_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A resumed run with key_fn over Arrow rows: every key finds its row (keys of chunks committed before the
    failure come from the interrupted run's key file or from the chunks' rows)."""
    flag = tmp_path / "flag"
    flag.touch()
    monkeypatch.setenv(FLAG, str(flag))
    out = tmp_path / "out"
    kwargs: dict[str, Any] = {"chunk_size": 2, "num_workers": 2, "use_checkpoint": True, "key_fn": key_of_row}
    with pytest.raises(WorkerError, match="transient"):
        litstream.optimize(row_failing_once, list(range(12)), out, verbose=False, **kwargs)
    litstream.optimize(row_failing_once, list(range(12)), out, verbose=False, **kwargs)
    assert set(layouts(out)) == {"arrow"}
    ds = litstream.StreamingDataset(out)
    assert [strict(ds.get_by_key(i)) for i in range(12)] == [strict(row(i)) for i in range(12)]
