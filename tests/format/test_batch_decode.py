"""``SampleDecoder.decode_many`` (the column-wise read hot path) gives exactly what ``decode`` gives."""

from __future__ import annotations

import mmap
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from litstream import FormatError
from litstream.format._chunk import ChunkView, pack_chunk
from litstream.format._index import DatasetConfig
from litstream.format._loaders import SampleDecoder, SampleEncoder
from same_values import assert_same

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path


def _chunk(samples: list[Any]) -> tuple[ChunkView, SampleDecoder]:
    encoder = SampleEncoder()
    items = [encoder.encode(s) for s in samples]
    config = DatasetConfig(data_format=tuple(encoder.data_format), data_spec=encoder.data_spec)
    return ChunkView(pack_chunk(items)), SampleDecoder(config)


def _check(view: ChunkView, decoder: SampleDecoder, items: list[int]) -> list[Any]:
    begins, ends = view.spans(items)
    many = decoder.decode_many(view.data, begins, ends)
    one = [decoder.decode(view.item(i)) for i in items]
    assert len(many) == len(one) == len(items)
    for a, b in zip(many, one, strict=True):
        assert_same(a, b, arrays_writeable=True)
    return many


SAMPLES: dict[str, Callable[[int], Any]] = {
    "fixed dict": lambda i: {"image": np.full((3, 4, 4), i, np.uint8), "label": i, "name": f"s{i:04d}"},
    "variable str and 1-d": lambda i: {"x": np.arange(i % 3 + 1, dtype=np.float32), "s": "é" * (i % 4), "f": i / 3},
    "mixed shapes": lambda i: (np.zeros((2, i % 2 + 1), np.int16) + i, bool(i % 2)),
    "nested": lambda i: {"a": [i, {"b": np.ones((2, 2)) * i}], "c": OrderedDict(d=str(i))},
    "tensor and pickle": lambda i: [torch.full((2, 2), float(i)), None, b"x" * i],
    "single leaf": lambda i: np.full((2, 3), i, np.int64),
    # unevenly spaced items whose scalars are gathered with one indexed take, rows built by a dict display
    "scalar rows": lambda i: {"i": i - 6, "s": "w" * (i * 7 % 13), "f": i / 7, "b": i % 3 == 0, "j": -(2**62) + i},
    "many keys": lambda i: {f"k{j}": i * j for j in range(40)},  # above the display's 32 keys: dict(zip())
    "int keys": lambda i: {1: i, 0: "x" * i, "1": float(i)},
}


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_decode_many_equals_decode(kind: str) -> None:
    view, decoder = _chunk([SAMPLES[kind](i) for i in range(12)])
    _check(view, decoder, list(range(12)))
    _check(view, decoder, [11, 0, 5, 5, 3])  # shuffled, repeated
    _check(view, decoder, [7])
    assert decoder.decode_many(view.data, *view.spans([])) == []


def test_fixed_shape_rows_are_independent_writable_arrays() -> None:
    view, decoder = _chunk([SAMPLES["fixed dict"](i) for i in range(5)])
    out = _check(view, decoder, [0, 1, 2, 3, 4])
    out[0]["image"][...] = 99
    assert int(out[1]["image"][0, 0, 0]) == 1
    assert [s["label"] for s in out] == [0, 1, 2, 3, 4]


def test_decode_many_from_a_read_only_mmap(tmp_path: Path) -> None:
    view, decoder = _chunk([SAMPLES["fixed dict"](i) for i in range(6)])
    path = tmp_path / "chunk.bin"
    path.write_bytes(bytes(view.data))
    with open(path, "rb") as f:
        mapped = ChunkView(mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ))
    out = _check(mapped, decoder, [5, 1, 2])
    assert out[0]["image"].flags.writeable
    assert int(out[0]["image"][0, 0, 0]) == 5


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.integers(-(2**63), 2**63 - 1), st.text(max_size=5), st.integers(0, 3)), min_size=1),
    st.randoms(use_true_random=False),
)
def test_decode_many_property(rows: list[tuple[int, str, int]], rnd: Any) -> None:
    samples = [{"n": n, "s": s, "a": np.full((1, k + 1), n % 7, np.int8)} for n, s, k in rows]
    view, decoder = _chunk(samples)
    order = list(range(len(samples)))
    rnd.shuffle(order)
    _check(view, decoder, order)


def test_spans_reject_out_of_range_with_the_item_error() -> None:
    view, _ = _chunk([SAMPLES["fixed dict"](i) for i in range(3)])
    with pytest.raises(FormatError, match=r"item 3 is outside this chunk of 3 items"):
        view.spans([0, 3])
    with pytest.raises(FormatError, match=r"item -1 is outside this chunk of 3 items"):
        view.spans([-1])


def test_malformed_item_raises_the_decode_error() -> None:
    view, decoder = _chunk([{"label": i} for i in range(3)])
    data = bytearray(view.data)
    begin = int(view.offsets[1])
    data[begin : begin + 4] = (9).to_bytes(4, "little")  # leaf size 9 > the 8 bytes stored
    broken = ChunkView(bytes(data))
    with pytest.raises(FormatError, match=r"shorter than its header announces"):
        decoder.decode_many(broken.data, *broken.spans([0, 1, 2]))


# Keys that would run code if a key ever became source text of the dict display that builds rows
# (``_batch_decode._dict_rows``): the keys come from index.json's ``data_spec``, a stranger's text.
_TOUCH = "__import__('pathlib').Path({marker!r}).touch()"
_CRAFTED = [
    "k}} for v0, in []] or [{touch} for _ in [0]] or [{{'x",
    "k': 1, **{{{touch}: 1}}, 'y",
    "k\nimport pathlib; pathlib.Path({marker!r}).touch()\n",
    "{touch}",
    "lambda: {touch}",
]


@pytest.mark.parametrize("extra", [0, 40])  # the dict display (<= 32 keys) and dict(zip()) beyond it
def test_crafted_keys_stay_data_and_run_no_code(tmp_path: Path, extra: int) -> None:
    marker = str(tmp_path / "ran")
    keys = [k.format(touch=_TOUCH.format(marker=marker), marker=marker) for k in _CRAFTED]
    keys += [f"pad{j}" for j in range(extra)]
    view, decoder = _chunk([{key: f"{i}:{j}" for j, key in enumerate(keys)} for i in range(6)])
    out = _check(view, decoder, [5, 0, 3])
    assert [list(sample) for sample in out] == [keys] * 3
    assert [sample[keys[0]] for sample in out] == ["5:0", "0:0", "3:0"]
    assert not (tmp_path / "ran").exists()


def test_the_dict_display_is_made_from_a_small_int_only() -> None:
    from litstream.format import _batch_decode

    with pytest.raises(ValueError, match="1 to 32 keys"):
        _batch_decode._dict_rows("0]; import os; [0")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="1 to 32 keys"):
        _batch_decode._dict_rows(33)
    assert _batch_decode._dict_rows(2)([[1, 2], ["a", "b"]], "x", "y") == [{"x": 1, "y": "a"}, {"x": 2, "y": "b"}]
