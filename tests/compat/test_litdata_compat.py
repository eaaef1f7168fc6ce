"""Interoperability with LitData (the peer library, installed as a test dependency).

* LitData writes, litstream reads (``StreamingDataset`` iteration, ``ds[i]``, ``astream``).
* litstream writes, LitData reads.
* Both write the same deterministic samples: byte-identical chunks and the same ``index.json``.
* Reported failures B23 (0-dim / zero-length tensors) and B24 (int next to 1-D arrays).

Every sample carries one leaf of each serializer both libraries share. LitData's optimize runs with
``start_method="fork"`` inside a clean helper process (``tests/clean_litdata.py``; spawning re-imports torch
per worker, ~8 s each). LitData's reader writes into a local dataset directory (it decompresses next to
the chunks and then deletes the compressed files), so LitData always reads its own copy of a dataset.
LitData decodes JPEG with torchvision, which is not installed here: it gets a Pillow-based JPEG serializer
instead, so both sides decode pixels with Pillow.
"""

from __future__ import annotations

import gc
import io
import json
import re
import shutil
from typing import TYPE_CHECKING, Any

import anyio
import numpy as np
import pytest
import torch
from PIL import Image
from PIL.JpegImagePlugin import JpegImageFile

import litstream
from clean_litdata import litdata_optimize
from dataset_files import in_version_log, without_version_log
from peer import litdata_marks, require_peer

if TYPE_CHECKING:
    from pathlib import Path

litdata = require_peer("litdata")
from litdata.streaming.serializers import JPEGSerializer  # noqa: E402

# LitData's item loader drops open chunk files without closing them (reads of our LitData copies only).
pytestmark = litdata_marks(r"ignore:unclosed file <_io\.FileIO name='[^']*-litdata-copy\d+/:ResourceWarning")

NUM_SAMPLES = 12
CHUNK_SIZE = 5

FULL_FORMAT = [
    "int", "float", "bool", "str", "bytes",
    "numpy", "numpy",
    "no_header_numpy:4", "no_header_numpy:8", "no_header_numpy:13", "no_header_numpy:3",
    "tensor", "tensor", "tensor",
    "no_header_tensor:18", "no_header_tensor:9",
    "pickle", "pickle", "pickle",
    "pil", "pil", "jpeg",
]  # fmt: skip

PLAIN_FORMAT = [
    "int", "float", "bool", "str", "bytes", "numpy", "no_header_numpy:3", "no_header_numpy:13",
    "tensor", "tensor", "no_header_tensor:9", "pil",
]  # fmt: skip


# -- samples (module level: LitData's workers import them) -------------------------------------------


def _rgb_array(i: int, height: int = 12, width: int = 20) -> np.ndarray:
    grid = np.arange(height * width * 3, dtype=np.int64).reshape(height, width, 3)
    return ((grid * (i + 3) + 7 * i) % 251).astype(np.uint8)


def _jpeg_bytes(i: int) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(_rgb_array(i, 16, 24), "RGB").save(buffer, format="JPEG")
    return buffer.getvalue()


def _jpeg_image(i: int) -> JpegImageFile:
    image = Image.open(io.BytesIO(_jpeg_bytes(i)))
    assert isinstance(image, JpegImageFile)
    return image


def full_sample(i: int) -> dict[str, Any]:
    """One leaf of every serializer kind litstream supports; all values depend on ``i``."""
    return {
        "int": i,
        "float": i / 3 - 1.25,
        "bool": i % 3 == 0,
        "str": f"héllo wörld ✓ 日本 #{i}",
        "bytes": bytes((i + k) % 256 for k in range(i + 1)) + b"\x00\xff",
        "np2_f32": (np.arange(6, dtype=np.float32).reshape(2, 3) + i) / 7,
        "np2_i64": np.arange(12, dtype=np.int64).reshape(3, 4) * (i - 5),
        "np1_u8": np.arange(i, i + 7, dtype=np.uint8),
        "np1_f16": np.linspace(-1, 1, 5, dtype=np.float16) * i,
        "np1_bool": np.array([(i + k) % 2 == 0 for k in range(4)]),
        "np1_i64": np.arange(3, dtype=np.int64) - 2**40 * i,
        "t0": torch.tensor(float(i) + 0.5),
        "t2_f32": torch.arange(8, dtype=torch.float32).reshape(2, 4) * (i + 1),
        "t_empty": torch.zeros((0, 3), dtype=torch.float32),
        "t1_i64": torch.arange(4, dtype=torch.int64) * -(i + 1),
        "t1_f16": torch.tensor([0.5, -1.5, float(i)], dtype=torch.float16),
        "np_scalar": np.int64(5 + i),
        "a_set": {i, i + 1, "x"},
        "none": None,
        "pil_rgb": Image.fromarray(_rgb_array(i), "RGB"),
        "pil_l": Image.fromarray(_rgb_array(i)[:, :, 0], "L"),
        "jpeg": _jpeg_image(i),
    }


def plain_sample(i: int) -> dict[str, Any]:
    """A deterministic sample without jpeg or pickle leaves (for byte identity); about 200-250 bytes, the
    size varying with ``i`` so that ``chunk_bytes`` boundaries fall unevenly."""
    return {
        "id": i,
        "score": 0.1 * i,
        "flag": i % 2 == 1,
        "name": f"échantillon-{i}" + "é" * (i % 4),
        "raw": bytes((7 * i + k) % 256 for k in range(40 * (i % 4))),
        "matrix": np.arange(6, dtype=np.float64).reshape(2, 3) * i,
        "ids": np.arange(i, i + 4, dtype=np.int64),
        "mask": np.arange(6) % (i + 2) == 0,
        "scalar": torch.tensor(i, dtype=torch.int32),
        "image_t": torch.arange(12, dtype=torch.uint8).reshape(2, 3, 2) + i,
        "half": torch.full((3,), i / 4, dtype=torch.float16),
        "thumb": Image.fromarray(_rgb_array(i, 2, 3), "RGB"),
    }


B23_TENSORS = [
    torch.tensor(3.0),
    torch.tensor(7, dtype=torch.int64),
    torch.zeros((0, 3), dtype=torch.int32),
    torch.zeros((0,), dtype=torch.float32),
]


def b23_single(i: int) -> dict[str, Any]:
    """The B23 trigger for tensors: one ``v`` leaf whose format the first sample (a 0-d tensor) fixes."""
    return {"v": B23_TENSORS[i]}


def b23_leaves(i: int) -> dict[str, Any]:
    """Every empty/0-dim kind of B23 as its own leaf, so each gets its own format."""
    return {
        "t0_f32": torch.tensor(3.0 + i),
        "t0_i64": torch.tensor(7 * i, dtype=torch.int64),
        "t_0x3_i32": torch.zeros((0, 3), dtype=torch.int32),
        "t_0_f32": torch.zeros((0,), dtype=torch.float32),
        "np_0x4_f64": np.zeros((0, 4), dtype=np.float64),
        "np_0_f32": np.zeros((0,), dtype=np.float32),
    }


B24_LENGTH = 99


def b24_sample(i: int) -> dict[str, Any]:
    return {
        "idx": i,
        "vec": np.arange(i, i + B24_LENGTH),
        "vec_f16": (np.arange(B24_LENGTH) / 8 + i).astype(np.float16),
        "vec_u8": ((np.arange(B24_LENGTH) + i) % 256).astype(np.uint8),
        "vec_bool": (np.arange(B24_LENGTH) + i) % 3 == 0,
        "tvec_i64": torch.arange(i, i + B24_LENGTH, dtype=torch.int64),
        "tvec_f16": (torch.arange(B24_LENGTH) / 4 + i).to(torch.float16),
    }


# -- expected decoded values --------------------------------------------------------------------------


def _pillow_jpeg_tensor(data: bytes) -> torch.Tensor:
    rgb = np.array(Image.open(io.BytesIO(data)).convert("RGB"), dtype=np.uint8)
    return torch.from_numpy(np.ascontiguousarray(rgb.transpose(2, 0, 1)))


def expected_full(i: int) -> dict[str, Any]:
    """``full_sample(i)`` as a reader returns it: the JPEG re-encoded by Pillow's defaults, decoded to CHW."""
    sample = full_sample(i)
    buffer = io.BytesIO()
    sample["jpeg"].save(buffer, format="JPEG")
    sample["jpeg"] = _pillow_jpeg_tensor(buffer.getvalue())
    return sample


class PillowJPEGSerializer(JPEGSerializer):  # type: ignore[misc]  # LitData is untyped
    """LitData's JPEG serializer, decoding with Pillow (torchvision is not installed here)."""

    def deserialize(self, data: bytes) -> torch.Tensor:
        return _pillow_jpeg_tensor(bytes(data))


# -- comparison ---------------------------------------------------------------------------------------


def assert_same(actual: Any, expected: Any, where: str = "sample") -> None:
    """Leaf-by-leaf equality with types: dtype + shape + values for arrays and tensors, mode + size + pixels
    for PIL images. ``bytes`` may come back as a ``memoryview`` from LitData (compared by content)."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{where}: {type(actual)} is not a dict"
        assert list(actual) == list(expected), f"{where}: keys {list(actual)} != {list(expected)}"
        for key in expected:
            assert_same(actual[key], expected[key], f"{where}[{key!r}]")
    elif isinstance(expected, (list, tuple)):
        assert type(actual) is type(expected), f"{where}: {type(actual)} != {type(expected)}"
        assert len(actual) == len(expected), f"{where}: length {len(actual)} != {len(expected)}"
        for k, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_same(a, e, f"{where}[{k}]")
    elif isinstance(expected, np.ndarray):
        assert isinstance(actual, np.ndarray), f"{where}: {type(actual)} is not an ndarray"
        assert actual.dtype == expected.dtype, f"{where}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.shape == expected.shape, f"{where}: shape {actual.shape} != {expected.shape}"
        assert np.array_equal(actual, expected), f"{where}: {actual} != {expected}"
    elif isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{where}: {type(actual)} is not a tensor"
        assert actual.dtype == expected.dtype, f"{where}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.shape == expected.shape, f"{where}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
        assert torch.equal(actual, expected), f"{where}: {actual} != {expected}"
    elif isinstance(expected, Image.Image):
        assert isinstance(actual, Image.Image), f"{where}: {type(actual)} is not a PIL image"
        assert (actual.mode, actual.size) == (expected.mode, expected.size), f"{where}: mode/size differ"
        assert actual.tobytes() == expected.tobytes(), f"{where}: pixels differ"
    elif isinstance(expected, (bytes, memoryview)):
        assert isinstance(actual, (bytes, memoryview)), f"{where}: {type(actual)} is not bytes"
        assert bytes(actual) == bytes(expected), f"{where}: {bytes(actual)!r} != {bytes(expected)!r}"
    else:
        assert type(actual) is type(expected), f"{where}: {type(actual)} != {type(expected)}"
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"


def assert_litstream_types(sample: dict[str, Any]) -> None:
    """litstream's own decoded types (stricter than the cross-library comparison)."""
    assert type(sample["bytes"]) is bytes
    assert type(sample["np_scalar"]) is np.int64
    assert sample["none"] is None
    jpeg = sample["jpeg"]
    assert jpeg.dtype == torch.uint8
    assert tuple(jpeg.shape) == (3, 16, 24)
    assert jpeg.is_contiguous()


# -- helpers ------------------------------------------------------------------------------------------


def _litdata_optimize(fn: Any, out: Path, **kwargs: Any) -> None:
    litdata_optimize(
        fn=fn,
        inputs=list(range(NUM_SAMPLES)),
        output_dir=str(out),
        verbose=False,
        **kwargs,
    )


def _litstream_optimize(fn: Any, out: Path, **kwargs: Any) -> None:
    litstream.optimize(fn, list(range(NUM_SAMPLES)), out, verbose=False, **kwargs)


def _snapshot(directory: Path, *, skip_version_log: bool = False) -> dict[str, bytes]:
    """Every file in ``directory`` by name (its version log left out on request: LitData writes none)."""
    files = sorted(directory.iterdir())
    return {p.name: p.read_bytes() for p in files if not (skip_version_log and in_version_log(p.name))}


def _index(directory: Path) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((directory / "index.json").read_text())
    return result


_copies = 0


def _litdata_copy(directory: Path) -> Path:
    """A private copy for LitData's reader (it writes into and deletes from a local dataset directory)."""
    global _copies
    _copies += 1
    target = directory.parent / f"{directory.name}-litdata-copy{_copies}"
    shutil.copytree(directory, target)
    return target


def litdata_iterate(directory: Path) -> list[Any]:
    ds = litdata.StreamingDataset(str(_litdata_copy(directory)), serializers={"jpeg": PillowJPEGSerializer()})
    samples = list(ds)
    del ds
    gc.collect()  # LitData's leaked chunk handles are closed here, inside this test
    return samples


def litdata_getitems(directory: Path) -> list[Any]:
    ds = litdata.StreamingDataset(str(_litdata_copy(directory)), serializers={"jpeg": PillowJPEGSerializer()})
    samples = [ds[i] for i in range(len(ds))]
    del ds
    gc.collect()
    return samples


def litstream_iterate(directory: Path) -> list[Any]:
    return list(litstream.StreamingDataset(directory, shuffle=False))


def litstream_getitems(directory: Path) -> list[Any]:
    ds = litstream.StreamingDataset(directory, shuffle=False)
    return [ds[i] for i in range(len(ds))]


async def _astream_all(directory: Path, *, managed: bool) -> list[Any]:
    if managed:
        async with litstream.astream(directory) as samples:
            return [sample async for sample in samples]
    return [sample async for sample in litstream.astream(directory)]


def _assert_lists_same(actual: list[Any], expected: list[Any], what: str) -> None:
    assert len(actual) == len(expected), f"{what}: {len(actual)} samples != {len(expected)}"
    for k, (a, e) in enumerate(zip(actual, expected, strict=True)):
        assert_same(a, e, f"{what}[{k}]")


# -- 1. LitData writes, litstream reads ---------------------------------------------------------------

# (workers, compression, compression_level): LitData 0.2.76 defaults zstd to framed "batch" chunks
WRITE_CASES = [
    pytest.param((1, None, None), id="w1-raw"),
    pytest.param((2, None, None), id="w2-raw"),
    pytest.param((1, "zstd", None), id="w1-zstd"),
    pytest.param((2, "zstd", None), id="w2-zstd"),
    pytest.param((1, "zstd:9", "chunk"), id="w1-zstd9-chunk"),
    pytest.param((1, "zstd", "sample"), id="w1-zstd-sample"),
]


def _compression_kwargs(compression: str | None, level: str | None) -> dict[str, Any]:
    return {"compression": compression} | ({"compression_level": level} if level else {})


def _chunk_suffix(compression: str | None, level: str | None) -> str:
    """``.zstd.bin`` only for whole-file compression; "batch" and "sample" chunks are ``.bin``."""
    return f".{compression}.bin" if compression and level == "chunk" else ".bin"


@pytest.fixture(scope="module", params=WRITE_CASES)
def litdata_written(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A LitData-written dataset of ``full_sample``, what LitData reads from it, and the files as written."""
    num_workers, compression, level = request.param
    out = tmp_path_factory.mktemp("litdata_written") / "data"
    kwargs = _compression_kwargs(compression, level)
    _litdata_optimize(full_sample, out, chunk_size=CHUNK_SIZE, num_workers=num_workers, **kwargs)
    files = _snapshot(out)
    return {
        "dir": out,
        "files": files,
        "compression": compression,
        "level": level,
        "litdata_iter": litdata_iterate(out),
        "litdata_items": litdata_getitems(out),
    }


def test_litdata_written_index(litdata_written: dict[str, Any]) -> None:
    index = _index(litdata_written["dir"])
    config = index["config"]
    assert config["data_format"] == FULL_FORMAT
    assert config["compression"] == litdata_written["compression"]
    assert config["chunk_size"] == CHUNK_SIZE
    assert config["chunk_bytes"] is None
    assert config["item_loader"] == "PyTreeLoader"
    assert sum(chunk["chunk_size"] for chunk in index["chunks"]) == NUM_SAMPLES
    suffix = _chunk_suffix(litdata_written["compression"], litdata_written["level"])
    expected_level = None if litdata_written["compression"] is None else (litdata_written["level"] or "batch")
    assert config["compression_level"] == (None if expected_level == "chunk" else expected_level)
    assert config["compression_batch_size"] == (256 if expected_level == "batch" else None)
    assert all(chunk["filename"].endswith(suffix) for chunk in index["chunks"])
    assert all(chunk["chunk_size"] <= CHUNK_SIZE for chunk in index["chunks"])
    # litstream reads the dataset without touching it.
    litstream_iterate(litdata_written["dir"])
    assert _snapshot(litdata_written["dir"]) == litdata_written["files"]


def test_litstream_iterates_litdata_dataset(litdata_written: dict[str, Any]) -> None:
    ours = litstream_iterate(litdata_written["dir"])
    theirs = litdata_written["litdata_iter"]
    _assert_lists_same(ours, theirs, "litstream vs LitData iteration")
    # LitData may hand its 12 inputs to either worker; each input appears once, with the values fn gave it.
    assert sorted(sample["int"] for sample in ours) == list(range(NUM_SAMPLES))
    for sample in ours:
        assert_same(sample, expected_full(sample["int"]), f"sample {sample['int']}")
        assert_litstream_types(sample)


def test_litstream_getitem_litdata_dataset(litdata_written: dict[str, Any]) -> None:
    ds = litstream.StreamingDataset(litdata_written["dir"], shuffle=False)
    assert len(ds) == NUM_SAMPLES
    ours = [ds[i] for i in range(NUM_SAMPLES)]
    _assert_lists_same(ours, litdata_written["litdata_items"], "litstream ds[i] vs LitData ds[i]")
    _assert_lists_same(ours, litdata_written["litdata_iter"], "litstream ds[i] vs LitData iteration")
    assert_same(ds[-1], ours[-1], "ds[-1]")


@pytest.mark.anyio
@pytest.mark.parametrize("managed", [False, True], ids=["plain", "async-with"])
async def test_astream_litdata_dataset(litdata_written: dict[str, Any], anyio_backend: str, managed: bool) -> None:
    ours = await _astream_all(litdata_written["dir"], managed=managed)
    _assert_lists_same(ours, litdata_written["litdata_iter"], f"astream on {anyio_backend} vs LitData")
    with anyio.fail_after(30):
        again = await _astream_all(litdata_written["dir"], managed=not managed)
    _assert_lists_same(again, ours, "second astream pass")


# -- 2. litstream writes, LitData reads ---------------------------------------------------------------


@pytest.fixture(scope="module", params=WRITE_CASES)
def litstream_written(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    num_workers, compression, level = request.param
    out = tmp_path_factory.mktemp("litstream_written") / "data"
    kwargs = _compression_kwargs(compression, level)
    _litstream_optimize(full_sample, out, chunk_size=CHUNK_SIZE, num_workers=num_workers, **kwargs)
    return {"dir": out, "compression": compression, "level": level, "num_workers": num_workers}


def test_litstream_written_index(litstream_written: dict[str, Any]) -> None:
    index = _index(litstream_written["dir"])
    config = index["config"]
    assert config["data_format"] == FULL_FORMAT
    assert config["compression"] == litstream_written["compression"]
    assert config["chunk_size"] == CHUNK_SIZE
    assert config["chunk_bytes"] is None
    assert config["item_loader"] == "PyTreeLoader"
    assert isinstance(index["updated_at"], str)
    assert float(index["updated_at"]) > 0
    # litstream writes whole-file zstd unless asked otherwise (readable by every LitData version)
    level = litstream_written["level"] or "chunk"
    suffix = _chunk_suffix(litstream_written["compression"], level)
    if litstream_written["compression"] is not None:
        assert config["compression_level"] == (None if level == "chunk" else level)
        assert config["compression_batch_size"] == (256 if level == "batch" else None)
    if litstream_written["num_workers"] == 1:
        layout = [(f"chunk-0-{n}{suffix}", size) for n, size in enumerate([5, 5, 2])]
    else:  # inputs 0-5 to rank 0, 6-11 to rank 1
        layout = [(f"chunk-{r}-{n}{suffix}", size) for r in (0, 1) for n, size in enumerate([5, 1])]
    assert [(c["filename"], c["chunk_size"]) for c in index["chunks"]] == layout
    assert sorted(without_version_log(p.name for p in litstream_written["dir"].iterdir())) == sorted(
        ["index.json", *(name for name, _ in layout)]
    )


def test_litdata_iterates_litstream_dataset(litstream_written: dict[str, Any]) -> None:
    ours = litstream_iterate(litstream_written["dir"])
    _assert_lists_same(ours, [expected_full(i) for i in range(NUM_SAMPLES)], "litstream vs fn")
    for sample in ours:
        assert_litstream_types(sample)
    theirs = litdata_iterate(litstream_written["dir"])
    _assert_lists_same(theirs, ours, "LitData vs litstream iteration")


def test_litdata_getitem_litstream_dataset(litstream_written: dict[str, Any]) -> None:
    ours = litstream_getitems(litstream_written["dir"])
    _assert_lists_same(ours, [expected_full(i) for i in range(NUM_SAMPLES)], "litstream ds[i] vs fn")
    theirs = litdata_getitems(litstream_written["dir"])
    _assert_lists_same(theirs, ours, "LitData ds[i] vs litstream ds[i]")


@pytest.mark.anyio
async def test_astream_litstream_dataset(litstream_written: dict[str, Any], anyio_backend: str) -> None:
    ours = await _astream_all(litstream_written["dir"], managed=True)
    _assert_lists_same(ours, [expected_full(i) for i in range(NUM_SAMPLES)], f"astream on {anyio_backend}")


# -- 3. byte identity ---------------------------------------------------------------------------------


_TIME = re.compile(r'"updated_at": "[^"]*"')


def _index_without_time(directory: Path) -> dict[str, Any]:
    index = _index(directory)
    assert re.fullmatch(r"\d+(\.\d+)?", index.pop("updated_at"))
    return index


@pytest.mark.parametrize(
    "chunking",
    [
        pytest.param({"chunk_size": CHUNK_SIZE}, id="chunk_size"),
        pytest.param({"chunk_bytes": "1KB"}, id="1KB"),
    ],
)
def test_byte_identical_to_litdata(chunking: dict[str, Any], tmp_path: Path) -> None:
    _litdata_optimize(plain_sample, tmp_path / "litdata", num_workers=1, **chunking)
    # checksum=None: byte for byte what LitData writes (the default adds one index key per chunk)
    _litstream_optimize(plain_sample, tmp_path / "litstream", num_workers=1, checksum=None, **chunking)
    theirs, ours = _snapshot(tmp_path / "litdata"), _snapshot(tmp_path / "litstream", skip_version_log=True)
    assert sorted(ours) == sorted(theirs)
    assert _TIME.sub("", ours["index.json"].decode()) == _TIME.sub("", theirs["index.json"].decode())
    for name in theirs:
        if name != "index.json":
            assert ours[name] == theirs[name], f"{name} differs"
    their_index = _index_without_time(tmp_path / "litdata")
    our_index = _index_without_time(tmp_path / "litstream")
    assert our_index == their_index
    assert our_index["config"]["data_format"] == PLAIN_FORMAT
    sizes = [chunk["chunk_size"] for chunk in our_index["chunks"]]
    assert sum(sizes) == NUM_SAMPLES
    if "chunk_size" in chunking:
        assert sizes == [5, 5, 2]
        assert our_index["config"]["chunk_size"] == CHUNK_SIZE
    else:
        assert our_index["config"]["chunk_bytes"] == 1000
        assert sizes == [3, 3, 2, 3, 1]  # items of ~190-340 bytes, uneven
        assert all(chunk["chunk_bytes"] <= 1000 for chunk in our_index["chunks"])
    expected = [plain_sample(i) for i in range(NUM_SAMPLES)]
    _assert_lists_same(litstream_iterate(tmp_path / "litdata"), expected, "litstream reads LitData's")


# -- 4. reported failures -----------------------------------------------------------------------------


def test_b23_zero_dim_and_empty_tensors_in_one_leaf(tmp_path: Path) -> None:
    out = tmp_path / "b23"
    litstream.optimize(b23_single, list(range(len(B23_TENSORS))), out, chunk_size=2, num_workers=1, verbose=False)
    config = _index(out)["config"]
    assert config["data_format"] == ["tensor"]
    ds = litstream.StreamingDataset(out, shuffle=False)
    assert len(ds) == len(B23_TENSORS)
    ours = [ds[i] for i in range(len(ds))]
    for i, tensor in enumerate(B23_TENSORS):
        assert_same(ours[i], {"v": tensor}, f"ds[{i}]")
    assert [tuple(s["v"].shape) for s in ours] == [(), (), (0, 3), (0,)]
    assert ours[0]["v"].item() == 3.0
    assert ours[1]["v"].item() == 7
    _assert_lists_same(litstream_iterate(out), ours, "iteration")
    _assert_lists_same(litdata_getitems(out), ours, "LitData ds[i]")
    _assert_lists_same(litdata_iterate(out), ours, "LitData iteration")


def test_b23_zero_dim_and_empty_leaves(tmp_path: Path) -> None:
    out = tmp_path / "b23"
    litstream.optimize(b23_leaves, list(range(5)), out, chunk_size=2, num_workers=1, verbose=False)
    assert _index(out)["config"]["data_format"] == [
        "tensor", "tensor", "tensor", "no_header_tensor:1", "numpy", "no_header_numpy:9",
    ]  # fmt: skip
    ds = litstream.StreamingDataset(out, shuffle=False)
    ours = [ds[i] for i in range(len(ds))]
    _assert_lists_same(ours, [b23_leaves(i) for i in range(5)], "ds[i]")
    assert ours[4]["t0_f32"].item() == 7.0
    assert ours[4]["t0_i64"].item() == 28
    _assert_lists_same(litstream_iterate(out), ours, "iteration")
    _assert_lists_same(litdata_iterate(out), ours, "LitData iteration")


def test_b24_int_next_to_1d_arrays(tmp_path: Path) -> None:
    out = tmp_path / "b24"
    litstream.optimize(b24_sample, list(range(10)), out, chunk_bytes="64MB", num_workers=1, verbose=False)
    assert _index(out)["config"]["data_format"] == [
        "int", "no_header_numpy:3", "no_header_numpy:8", "no_header_numpy:4", "no_header_numpy:13",
        "no_header_tensor:18", "no_header_tensor:9",
    ]  # fmt: skip
    ds = litstream.StreamingDataset(out, shuffle=False)
    assert len(ds) == 10
    for i in range(10):
        sample = ds[i]
        assert sample["idx"] == i
        assert type(sample["idx"]) is int
        assert sample["vec"].dtype == np.int64
        assert sample["vec"].shape == (B24_LENGTH,)
        assert np.array_equal(sample["vec"], np.arange(i, i + B24_LENGTH))
        assert_same(sample, b24_sample(i), f"ds[{i}]")

    loader = litstream.StreamingDataLoader(litstream.StreamingDataset(out, shuffle=False), batch_size=1)
    batches = list(loader)
    assert len(batches) == 10
    for i, batch in enumerate(batches):
        assert torch.equal(batch["idx"], torch.tensor([i]))
        expected = b24_sample(i)
        for key in ("vec", "vec_f16", "vec_u8", "vec_bool", "tvec_i64", "tvec_f16"):
            value = batch[key]
            assert isinstance(value, torch.Tensor), key
            assert tuple(value.shape) == (1, B24_LENGTH), key
            assert torch.equal(value[0], torch.as_tensor(expected[key])), f"batch {i} {key}"
        assert batch["vec"].dtype == torch.int64
        assert batch["vec_bool"].dtype == torch.bool

    _assert_lists_same(litdata_iterate(out), [b24_sample(i) for i in range(10)], "LitData iteration")
    _assert_lists_same(litdata_getitems(out), [b24_sample(i) for i in range(10)], "LitData ds[i]")


def test_b24_litdata_written(tmp_path: Path) -> None:
    out = tmp_path / "b24"
    _litdata_optimize(b24_sample, out, chunk_bytes="64MB", num_workers=1)
    expected = [b24_sample(i) for i in range(NUM_SAMPLES)]
    _assert_lists_same(litstream_getitems(out), expected, "litstream ds[i] on LitData's B24 data")
    batches = list(litstream.StreamingDataLoader(litstream.StreamingDataset(out, shuffle=False), batch_size=1))
    assert [tuple(b["vec"].shape) for b in batches] == [(1, B24_LENGTH)] * NUM_SAMPLES
    assert [int(b["idx"]) for b in batches] == list(range(NUM_SAMPLES))
