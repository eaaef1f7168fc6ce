"""``fast_collate`` (StreamingDataLoader's default) returns exactly what torch's ``default_collate`` returns."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from torch.utils.data import default_collate

from litstream._torch._collate import fast_collate, shared_block
from litstream.format._chunk import ChunkView, pack_chunk
from litstream.format._index import DatasetConfig
from litstream.format._loaders import SampleDecoder, SampleEncoder
from same_values import assert_same


def _decoded(samples: list[Any]) -> list[Any]:
    encoder = SampleEncoder()
    items = [encoder.encode(s) for s in samples]
    view = ChunkView(pack_chunk(items))
    decoder = SampleDecoder(DatasetConfig(data_format=tuple(encoder.data_format), data_spec=encoder.data_spec))
    return decoder.decode_many(view.data, *view.spans(range(len(items))))


def _dict_sample(i: int) -> dict[str, Any]:
    return {"image": np.full((3, 2, 2), i, np.uint8), "label": i, "name": f"n{i}", "f": i / 2}


def test_decoded_block_is_batched_without_a_copy() -> None:
    batch = _decoded([_dict_sample(i) for i in range(6)])
    out = fast_collate(batch)
    assert_same(out, default_collate(batch))
    assert out["image"].data_ptr() == batch[0]["image"].ctypes.data  # the decoded block itself


@pytest.mark.parametrize(
    "batch",
    [
        [_dict_sample(i) for i in range(4)],  # arrays not from one block
        [(np.arange(3) + i, i, "s") for i in range(3)],
        [[np.float32(i), True, b"x"] for i in range(3)],
        [np.full((2, 2), i, np.int16) for i in range(3)],
        [{"a": {"b": np.ones(2) * i}, "c": [i, i]} for i in range(3)],
        [3, 4, 5],
    ],
)
def test_same_as_default_collate(batch: list[Any]) -> None:
    assert_same(fast_collate(batch), default_collate(batch))


def test_a_reordering_or_repetition_of_a_block_is_copied() -> None:
    batch = _decoded([_dict_sample(i) for i in range(6)])
    for part in (batch[::-1], [batch[0], batch[0]], batch[:4:2]):
        out = fast_collate(part)
        assert_same(out, default_collate(part))
        assert out["image"].data_ptr() != part[0]["image"].ctypes.data


def test_consecutive_rows_of_a_block_are_a_view_of_it() -> None:
    # a decoded block may hold several loader batches (read.engine._decode.work_batches): each is a slice of it
    batch = _decoded([_dict_sample(i) for i in range(6)])
    for part in (batch[:3], batch[2:5], batch[5:]):
        out = fast_collate(part)
        assert_same(out, default_collate(part))
        assert out["image"].data_ptr() == part[0]["image"].ctypes.data


def test_errors_are_default_collates() -> None:
    with pytest.raises(KeyError, match="b"):
        fast_collate([{"a": 1, "b": 2}, {"a": 3}])
    with pytest.raises(RuntimeError, match="each element in list of batch should be of equal size"):
        fast_collate([(1, 2), (3,)])


def test_blocks_in_shared_memory_are_batched_as_shared_tensors() -> None:
    encoder = SampleEncoder()
    samples = [_dict_sample(i) for i in range(5)]
    items = [encoder.encode(s) for s in samples]
    view = ChunkView(pack_chunk(items))
    decoder = SampleDecoder(DatasetConfig(data_format=tuple(encoder.data_format), data_spec=encoder.data_spec))
    batch = decoder.decode_many(view.data, *view.spans(range(5)), shared_block)
    assert all(s["image"].flags.writeable for s in batch)
    out = fast_collate(batch)
    assert_same(out, default_collate(batch))
    assert out["image"].is_shared()  # crosses to the main process without another copy
    assert out["image"].data_ptr() == batch[0]["image"].ctypes.data
