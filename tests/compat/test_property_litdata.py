"""Property test against LitData 0.2.76: random datasets written by one library read back identical in the other.

Each example is a dataset of a few ``dict`` samples sharing one random layout: ints, floats, bools,
str, bytes, NumPy arrays and torch tensors of several dtypes and ranks, PIL images, nested dicts, and
JSON lists / dicts (stored as LitData 0.2.76's ``json`` leaves, their lengths varying per sample), written
without compression or with zstd at each ``compression_level``. Every sample holds an array or a tensor, so
LitData keeps its pytree chunks (scalar-only dicts become Arrow chunks, a format of its own).
"""

from __future__ import annotations

import functools
import gc
import json
import shutil
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image

import litstream
from peer import litdata_marks, require_peer

if TYPE_CHECKING:
    from pathlib import Path

litdata = require_peer("litdata")
from litdata.streaming.writer import BinaryWriter  # noqa: E402

# The ResourceWarning filter: LitData's reader leaves chunk files open.
pytestmark = litdata_marks("ignore::ResourceWarning", "ignore:An item was larger:UserWarning")

NP_DTYPES = [np.uint8, np.int32, np.int64, np.float32, np.float64, np.bool_]
TORCH_DTYPES = [torch.uint8, torch.int32, torch.int64, torch.float16, torch.float32]
COMPRESSIONS = [
    {},
    {"compression": "zstd", "compression_level": "chunk"},
    {"compression": "zstd:3", "compression_level": "batch", "compression_batch_size": 2},
    {"compression": "zstd", "compression_level": "sample"},
]

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.text(max_size=6)
    | st.floats(allow_nan=False, allow_infinity=False)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
json_lists = st.lists(json_values, max_size=5) | st.lists(st.integers(-(2**63), 2**63 - 1), max_size=5)


def _leaf_kinds() -> st.SearchStrategy[Any]:
    scalar = st.sampled_from(["int", "float", "bool", "str", "bytes", "json"])
    array = st.tuples(st.just("np"), st.sampled_from(range(len(NP_DTYPES))), st.sampled_from([1, 2]))
    tensor = st.tuples(st.just("torch"), st.sampled_from(range(len(TORCH_DTYPES))), st.sampled_from([0, 1, 2]))
    image = st.tuples(st.just("pil"), st.sampled_from(["RGB", "L"]))
    return scalar | array | tensor | image


keys = st.text(alphabet="abcdefgh", min_size=1, max_size=3)
layouts = st.recursive(
    _leaf_kinds(), lambda inner: st.dictionaries(keys, inner, min_size=1, max_size=3), max_leaves=6
).map(lambda layout: layout if isinstance(layout, dict) else {"v": layout})


def _value(kind: Any, draw: Any) -> Any:
    if isinstance(kind, dict):
        return {key: _value(sub, draw) for key, sub in kind.items()}
    if kind == "int":
        return draw(st.integers(-(2**63), 2**63 - 1))
    if kind == "float":
        return draw(st.floats(allow_nan=False))
    if kind == "bool":
        return draw(st.booleans())
    if kind == "str":
        return draw(st.text(max_size=8))
    if kind == "bytes":
        return draw(st.binary(max_size=8))
    if kind == "json":
        return draw(json_lists)
    if kind[0] == "np":
        shape = draw(st.lists(st.integers(0, 3), min_size=kind[2], max_size=kind[2]))
        size = int(np.prod(shape))
        values = draw(st.lists(st.integers(0, 200), min_size=size, max_size=size))
        return np.asarray(values).reshape(shape).astype(NP_DTYPES[kind[1]])
    if kind[0] == "torch":
        shape = draw(st.lists(st.integers(1, 3), min_size=kind[2], max_size=kind[2]))
        return (torch.arange(int(np.prod(shape))).reshape(shape) * draw(st.integers(0, 9))).to(TORCH_DTYPES[kind[1]])
    pixels = np.full((2, 3, 3), draw(st.integers(0, 255)), dtype=np.uint8)
    return Image.fromarray(pixels if kind[1] == "RGB" else pixels[:, :, 0], kind[1])


@st.composite
def datasets(draw: Any) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    layout = draw(layouts)
    layout["anchor"] = ("torch", draw(st.sampled_from(range(len(TORCH_DTYPES)))), 1)  # keeps pytree chunks
    count = draw(st.integers(1, 6))
    samples = [_value(layout, draw) for _ in range(count)]
    return samples, draw(st.sampled_from(COMPRESSIONS))


def assert_same(actual: Any, expected: Any, where: str) -> None:
    if isinstance(expected, dict):
        assert isinstance(actual, dict), where
        assert list(actual) == list(expected), where
        for key in expected:
            assert_same(actual[key], expected[key], f"{where}[{key!r}]")
    elif isinstance(expected, list):
        assert isinstance(actual, list), f"{where}: {type(actual)}"
        assert len(actual) == len(expected), where
        for k, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_same(a, e, f"{where}[{k}]")
    elif isinstance(expected, np.ndarray):
        assert isinstance(actual, np.ndarray), where
        assert (actual.dtype, actual.shape) == (expected.dtype, expected.shape), where
        assert np.array_equal(actual, expected), where
    elif isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), where
        assert (actual.dtype, actual.shape) == (expected.dtype, expected.shape), where
        assert torch.equal(actual, expected), where
    elif isinstance(expected, Image.Image):
        assert isinstance(actual, Image.Image), where
        assert (actual.mode, actual.size, actual.tobytes()) == (expected.mode, expected.size, expected.tobytes())
    elif isinstance(expected, bytes):
        assert bytes(actual) == expected, where
    else:
        assert type(actual) is type(expected), f"{where}: {type(actual)} != {type(expected)}"
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"


def _litdata_write(samples: list[Any], out: Path, compression: dict[str, Any]) -> None:
    writer = BinaryWriter(str(out), chunk_size=2, **compression)
    for i, sample in enumerate(samples):
        writer[i] = sample
    writer.done()
    writer.merge()


def _pick(samples: list[Any], i: int) -> Any:
    return samples[i]


def _litdata_read(directory: Path) -> tuple[list[Any], list[Any]]:
    copy = directory.parent / f"{directory.name}-litdata"
    shutil.copytree(directory, copy)
    ds = litdata.StreamingDataset(str(copy), shuffle=False)
    result = list(ds), [ds[i] for i in range(len(ds))]
    del ds
    gc.collect()  # LitData's reader leaves chunk files open: close them here, under this module's filter
    return result


SETTINGS = settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


@SETTINGS
@given(data=datasets())
def test_litdata_writes_litstream_reads(tmp_path_factory: pytest.TempPathFactory, data: Any) -> None:
    samples, compression = data
    out = tmp_path_factory.mktemp("ld") / "data"
    _litdata_write(samples, out, compression)
    ds = litstream.StreamingDataset(out, shuffle=False)
    assert len(ds) == len(samples)
    for i, sample in enumerate(ds):
        assert_same(sample, samples[i], f"iteration {i}")
    for i in range(len(samples)):
        assert_same(ds[i], samples[i], f"ds[{i}]")


@SETTINGS
@given(data=datasets())
def test_litstream_writes_litdata_reads(tmp_path_factory: pytest.TempPathFactory, data: Any) -> None:
    samples, compression = data
    out = tmp_path_factory.mktemp("ls") / "data"
    fn = functools.partial(_pick, samples)
    litstream.optimize(fn, list(range(len(samples))), out, chunk_size=2, num_workers=1, verbose=False, **compression)
    iterated, items = _litdata_read(out)
    assert len(iterated) == len(samples)
    for i, sample in enumerate(iterated):
        assert_same(sample, samples[i], f"LitData iteration {i}")
    for i, sample in enumerate(items):
        assert_same(sample, samples[i], f"LitData ds[{i}]")


def _tuple_sample(i: int) -> tuple[Any, ...]:
    return (i, str(i), [i, i + 1], np.arange(i, dtype=np.int64))


def test_uncompressed_chunks_of_a_batch_indexed_dataset_read(tmp_path: Path) -> None:
    # LitData 0.2.76 announces "batch" but leaves chunks of non-dict samples with list fields uncompressed
    samples = [_tuple_sample(i) for i in range(5)]
    _litdata_write(samples, tmp_path, {"compression": "zstd"})
    config = json.loads((tmp_path / "index.json").read_text())["config"]
    assert config["compression_level"] == "batch"
    ours = list(litstream.StreamingDataset(tmp_path, shuffle=False))
    assert_same([list(s) for s in ours], [list(s) for s in samples], "tuples")


@pytest.mark.parametrize("level", ["batch", "sample"])
def test_litdata_reads_in_file_compressed_tuples(tmp_path: Path, level: str) -> None:
    samples = [_tuple_sample(i) for i in range(5)]
    fn = functools.partial(_pick, samples)
    out = tmp_path / "data"
    litstream.optimize(fn, list(range(5)), out, chunk_size=2, num_workers=1, verbose=False, compression="zstd",
                       compression_level=level, compression_batch_size=1 if level == "batch" else None)  # fmt: skip
    assert (out / "chunk-0-0.bin").read_bytes().startswith(b"LDFZ01") == (level == "batch")
    iterated, items = _litdata_read(out)
    for got in (iterated, items):
        assert_same([list(s) for s in got], [list(s) for s in samples], f"LitData {level}")
