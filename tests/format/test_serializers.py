"""Tests for litstream.format._serializers: LitData byte compatibility, round trips, selection and errors."""

from __future__ import annotations

import io
import os
import re
import struct
import subprocess
import sys
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from PIL import Image
from PIL.JpegImagePlugin import JpegImageFile

from litstream._core._errors import FormatError
from litstream.format._loaders import _reader_registry
from litstream.format._serializers import (
    JpegSerializer,
    NoHeaderNumpySerializer,
    NoHeaderTensorSerializer,
    PickleSerializer,
    Serializer,
    TensorSerializer,
    default_serializers,
    select_serializer,
    serializer_for_format,
)
from litstream.format.media._registry import MEDIA_KEYS
from peer import require_peer

if TYPE_CHECKING:
    from types import ModuleType

KEYS = [
    "str", "text", "bool", "int", "float", "video", "audio", "image", "nifti", "mesh", "pdf", "graph",
    "tifffile", "file", "pil", "jpeg", "jpeg_array", "bytes",
    "no_header_numpy", "numpy", "no_header_tensor", "tensor", "json", "pickle",
]  # fmt: skip
ALIASES = ["tiff"]  # LitData's name for Tiff wrappers, read but never written

LITDATA_CLASSES = {
    "str": "StringSerializer",
    "bool": "BooleanSerializer",
    "int": "IntegerSerializer",
    "float": "FloatSerializer",
    "pil": "PILSerializer",
    "jpeg": "JPEGSerializer",
    "bytes": "BytesSerializer",
    "no_header_numpy": "NoHeaderNumpySerializer",
    "numpy": "NumpySerializer",
    "no_header_tensor": "NoHeaderTensorSerializer",
    "tensor": "TensorSerializer",
    "pickle": "PickleSerializer",
}

NUMPY_DTYPES = [
    np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
    np.float16, np.float32, np.float64, np.complex64, np.complex128, np.bool_,
]  # fmt: skip
TORCH_DTYPES = [
    torch.float32, torch.float64, torch.float16, torch.complex64, torch.complex128, torch.uint8,
    torch.int8, torch.int16, torch.int32, torch.int64, torch.bool, torch.uint16,
]  # fmt: skip
# NumPy dtypes that have a torch twin listed in table D1 (uint32/uint64 have none).
TORCH_NUMPY_DTYPES = [dtype for dtype in NUMPY_DTYPES if dtype not in (np.uint32, np.uint64)]


@pytest.fixture(scope="module")
def litdata() -> ModuleType:
    module: ModuleType = require_peer("litdata.streaming.serializers")
    return module


def _pil(mode: str, size: tuple[int, int] = (5, 3)) -> Image.Image:
    pixels = np.arange(size[0] * size[1] * 4, dtype=np.uint8)
    image = Image.new(mode, size)
    if mode in ("L", "RGB", "RGBA"):
        bands = len(mode)
        data = pixels[: size[0] * size[1] * bands].reshape(size[1], size[0], bands)
        image = Image.fromarray(data.squeeze(-1) if bands == 1 else data, mode=mode)
    else:
        image.putdata([int(v) for v in pixels[: size[0] * size[1]]])
    return image


def _jpeg(size: tuple[int, int] = (16, 8), mode: str = "RGB", exif: bytes | None = None) -> bytes:
    grid = np.add.outer(np.arange(size[1]) * 13, np.arange(size[0]) * 7).astype(np.uint8)
    rgb = np.stack([grid, 255 - grid, grid // 2], axis=-1)
    image = Image.fromarray(rgb).convert(mode)
    buffer = io.BytesIO()
    if exif is None:
        image.save(buffer, format="JPEG")
    else:
        image.save(buffer, format="JPEG", exif=exif)
    return buffer.getvalue()


def assert_same(actual: Any, expected: Any) -> None:
    """Exact equality: type, dtype, shape and bytes for arrays/tensors, mode/size/pixels for images."""
    if isinstance(expected, np.ndarray):
        assert isinstance(actual, np.ndarray)
        assert (actual.dtype, actual.shape) == (expected.dtype, expected.shape)
        assert actual.tobytes() == expected.tobytes()
    elif isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor)
        assert (actual.dtype, tuple(actual.shape)) == (expected.dtype, tuple(expected.shape))
        assert actual.numpy().tobytes() == expected.numpy().tobytes()
    elif isinstance(expected, Image.Image):
        assert isinstance(actual, Image.Image)
        assert (actual.mode, actual.size) == (expected.mode, expected.size)
        assert actual.tobytes() == expected.tobytes()
    else:
        assert type(actual) is type(expected)
        assert actual == expected


CASES: list[Any] = [
    pytest.param("", "str", id="str-empty"),
    pytest.param("héllo wörld ✓ 🚀 日本", "str", id="str-unicode"),
    pytest.param(True, "bool", id="bool-true"),
    pytest.param(False, "bool", id="bool-false"),
    pytest.param(0, "int", id="int-0"),
    pytest.param(-1, "int", id="int-neg"),
    pytest.param(2**63 - 1, "int", id="int-max"),
    pytest.param(-(2**63), "int", id="int-min"),
    pytest.param(0.5, "float", id="float"),
    pytest.param(-1e300, "float", id="float-big"),
    pytest.param(float("inf"), "float", id="float-inf"),
    pytest.param(b"", "bytes", id="bytes-empty"),
    pytest.param(b"\x00\xffabc", "bytes", id="bytes"),
    *[
        pytest.param(np.arange(5).astype(dtype), "no_header_numpy", id=f"np1d-{np.dtype(dtype).name}")
        for dtype in NUMPY_DTYPES
    ],
    pytest.param(np.array([1, 2**64 - 1], dtype=np.uint64), "no_header_numpy", id="np1d-uint64-max"),
    pytest.param(np.zeros((0,), dtype=np.float32), "no_header_numpy", id="np1d-empty"),
    pytest.param(np.arange(10, dtype=np.int32)[::3], "no_header_numpy", id="np1d-strided"),
    pytest.param(np.arange(6, dtype=np.float32).reshape(2, 3), "numpy", id="np-f32-2x3"),
    pytest.param(np.arange(24, dtype=np.uint8).reshape(2, 3, 4), "numpy", id="np-u8-2x3x4"),
    pytest.param(np.array([[0.5, -2], [1e4, 3]], dtype=np.float16), "numpy", id="np-f16"),
    pytest.param(np.array([[2**64 - 1, 0], [7, 8]], dtype=np.uint64), "numpy", id="np-u64"),
    pytest.param(np.array([[True, False, True]]), "numpy", id="np-bool"),
    pytest.param(np.zeros((0, 4), dtype=np.int64), "numpy", id="np-empty-0x4"),
    pytest.param(np.zeros((3, 0), dtype=np.bool_), "numpy", id="np-empty-3x0"),
    pytest.param(np.arange(12, dtype=np.float64).reshape(3, 4).T, "numpy", id="np-transposed"),
    *[pytest.param(torch.arange(5).to(dtype), "no_header_tensor", id=f"t1d-{dtype}") for dtype in TORCH_DTYPES],
    pytest.param(torch.zeros(0), "no_header_tensor", id="t1d-empty"),
    pytest.param(torch.arange(10)[::2], "no_header_tensor", id="t1d-strided"),
    pytest.param(torch.tensor(1.5), "tensor", id="t0d-f32"),
    pytest.param(torch.tensor(-7), "tensor", id="t0d-i64"),
    pytest.param(torch.tensor(True), "tensor", id="t0d-bool"),
    pytest.param(torch.zeros((0, 3)), "tensor", id="t-empty-0x3"),
    pytest.param(torch.arange(6, dtype=torch.int16).reshape(2, 3), "tensor", id="t-i16-2x3"),
    pytest.param(torch.arange(8).reshape(2, 2, 2) % 2 == 0, "tensor", id="t-bool-2x2x2"),
    pytest.param(torch.arange(12, dtype=torch.float64).reshape(3, 4).T, "tensor", id="t-transposed"),
    pytest.param(_pil("L"), "pil", id="pil-L"),
    pytest.param(_pil("RGB"), "pil", id="pil-RGB"),
    pytest.param(_pil("RGBA"), "pil", id="pil-RGBA"),
    pytest.param(_pil("I;16"), "pil", id="pil-I16"),
    pytest.param({"a": [1, 2], "b": None, "c": "x"}, "pickle", id="pickle-dict"),
    pytest.param(None, "pickle", id="pickle-none"),
    pytest.param(np.int64(5), "pickle", id="pickle-np-int64"),
    pytest.param(np.float32(1.5), "pickle", id="pickle-np-float32"),
    pytest.param(np.bool_(True), "pickle", id="pickle-np-bool"),
    pytest.param(bytearray(b"xy"), "pickle", id="pickle-bytearray"),
    pytest.param(np.array(3.0), "pickle", id="pickle-np-0d"),
]


def _litdata_key(litdata: ModuleType, value: Any) -> str:
    for key, serializer in litdata._SERIALIZERS.items():
        if serializer.can_serialize(value):
            return str(key)
    raise AssertionError("LitData's pickle serializer accepts everything")


@pytest.mark.litdata
@pytest.mark.parametrize(("value", "key"), CASES)
def test_matches_litdata_bytes_and_names(litdata: ModuleType, value: Any, key: str) -> None:
    registry = default_serializers()
    ours = select_serializer(value, registry)
    assert ours.name == key
    assert _litdata_key(litdata, value) == key

    payload, data_format = ours.serialize(value)
    theirs = getattr(litdata, LITDATA_CLASSES[key])()
    their_payload, their_format = theirs.serialize(value)
    assert payload == their_payload
    assert data_format == their_format
    recorded = data_format or key
    assert (recorded.partition(":")[0]) == key

    # Ours reads LitData's bytes; LitData reads ours (a bytearray keeps torch from warning).
    assert_same(serializer_for_format(recorded, registry).deserialize(their_payload), value)
    theirs.setup(recorded)
    decoded = theirs.deserialize(bytearray(payload))
    assert_same(bytes(decoded) if key == "bytes" else decoded, value)


@pytest.mark.litdata
def test_no_header_names_use_the_written_dtype_index(litdata: ModuleType) -> None:
    registry = default_serializers()
    expected_torch = {
        torch.float32: 1, torch.float64: 3, torch.complex64: 5, torch.complex128: 7, torch.float16: 9,
        torch.uint8: 11, torch.int8: 12, torch.int16: 14, torch.int32: 16, torch.int64: 18,
        torch.bool: 19, torch.uint16: 20,
    }  # fmt: skip
    for dtype, index in expected_torch.items():
        _, name = registry["no_header_tensor"].serialize(torch.zeros(2, dtype=dtype))
        assert name == f"no_header_tensor:{index}"
        header, _ = registry["tensor"].serialize(torch.zeros((1, 1), dtype=dtype))
        assert struct.unpack(">3I", header[:12]) == (index, 2, 1)
    for index, np_dtype in enumerate(NUMPY_DTYPES):
        _, name = registry["no_header_numpy"].serialize(np.zeros(2, dtype=np_dtype))
        assert name == f"no_header_numpy:{index}"
        assert litdata.NoHeaderNumpySerializer().serialize(np.zeros(2, dtype=np_dtype))[1] == name


def test_np_float64_is_stored_as_float() -> None:
    registry = default_serializers()
    serializer = select_serializer(np.float64(2.25), registry)
    payload, name = serializer.serialize(np.float64(2.25))
    assert (serializer.name, name, payload) == ("float", None, struct.pack("<d", 2.25))
    decoded = serializer.deserialize(payload)
    assert type(decoded) is float
    assert decoded == 2.25


@pytest.mark.litdata
@pytest.mark.parametrize("mode", ["RGB", "L"])
def test_jpeg_matches_litdata_encoding(litdata: ModuleType, mode: str) -> None:
    image = Image.open(io.BytesIO(_jpeg(mode=mode)))
    assert isinstance(image, JpegImageFile)
    registry = default_serializers()
    assert select_serializer(image, registry).name == "jpeg"
    assert _litdata_key(litdata, image) == "jpeg"

    payload, name = registry["jpeg"].serialize(image)
    their_payload, their_name = litdata.JPEGSerializer().serialize(image)
    assert (payload, name) == (their_payload, their_name)

    # LitData decodes with torchvision (absent here); compare both payloads decoded by Pillow.
    decoded = registry["jpeg"].deserialize(their_payload)
    reference = np.array(Image.open(io.BytesIO(payload)).convert("RGB")).transpose(2, 0, 1)
    assert decoded.dtype == torch.uint8
    assert tuple(decoded.shape) == (3, 8, 16)
    assert decoded.is_contiguous()
    assert np.array_equal(decoded.numpy(), reference)


@pytest.mark.litdata
def test_jpeg_decode_applies_exif_orientation_like_litdata(litdata: ModuleType) -> None:
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise on display
    payload = _jpeg(size=(16, 8), exif=exif.tobytes())
    decoded = JpegSerializer().deserialize(memoryview(payload))
    assert tuple(decoded.shape) == (3, 16, 8)
    # With an Exif marker present LitData decodes with Pillow too, so pixels must match exactly.
    with warnings.catch_warnings():  # LitData wraps a read-only array; torch warns about it once.
        warnings.simplefilter("ignore", UserWarning)
        theirs = litdata.JPEGSerializer().deserialize(payload)
    assert torch.equal(decoded, theirs)


def test_pil_payload_layout() -> None:
    image = _pil("RGB", size=(5, 3))
    payload, name = default_serializers()["pil"].serialize(image)
    assert name is None
    assert payload[:15] == struct.pack("<3I", 5, 3, 3) + b"RGB"
    assert payload[15:] == image.tobytes()
    assert len(payload) == 15 + 5 * 3 * 3


def test_selection_priority() -> None:
    registry = default_serializers()
    png = io.BytesIO()
    _pil("RGB").save(png, format="PNG")
    expectations: list[tuple[Any, str]] = [
        (True, "bool"),
        (1, "int"),
        (np.float64(1.0), "float"),
        (np.int64(1), "pickle"),
        (np.array(1.0), "pickle"),
        (np.zeros(3), "no_header_numpy"),
        (np.zeros((1, 3)), "numpy"),
        (torch.tensor(1.0), "tensor"),
        (torch.zeros(3), "no_header_tensor"),
        (torch.zeros((1, 3)), "tensor"),
        (b"%PDF-1.4", "bytes"),  # LitData stores it as "pdf"; bare bytes stay bytes here (docs/media.md)
        (bytearray(b"x"), "pickle"),
        (__file__, "str"),
        (Image.open(png), "pil"),
        (Image.open(io.BytesIO(_jpeg())), "jpeg"),
        (object, "pickle"),
    ]
    assert [select_serializer(value, registry).name for value, _ in expectations] == [key for _, key in expectations]


@pytest.mark.litdata
def test_default_registry_order_follows_litdata(litdata: ModuleType) -> None:
    first, second = default_serializers(), default_serializers()
    assert list(first) == [*KEYS[:-1], "litdata_types", KEYS[-1], *ALIASES]  # LitData's wrappers, before pickle
    assert first is not second
    assert all(first[key] is not second[key] for key in KEYS)
    assert [key for key in litdata._SERIALIZERS if key in first] == KEYS
    assert {key: first[key].fixed_size for key in KEYS if first[key].fixed_size} == {
        "bool": 1,
        "int": 8,
        "float": 8,
    }


def test_select_serializer_without_match_raises() -> None:
    registry = {"int": default_serializers()["int"]}
    with pytest.raises(FormatError, match=r"type str; registered: int"):
        select_serializer("x", registry)


def test_serializer_for_format_resolution() -> None:
    registry = default_serializers()
    numpy_f64 = serializer_for_format("no_header_numpy:10", registry)
    assert isinstance(numpy_f64, NoHeaderNumpySerializer)
    assert numpy_f64.dtype == np.dtype(np.float64)
    tensor_i64 = serializer_for_format("no_header_tensor:18", registry)
    assert isinstance(tensor_i64, NoHeaderTensorSerializer)
    assert tensor_i64.dtype == torch.int64
    assert serializer_for_format("no_header_tensor:0", registry).dtype == torch.float32  # type: ignore[attr-defined]
    assert serializer_for_format("no_header_tensor:10", registry).dtype == torch.bfloat16  # type: ignore[attr-defined]
    assert serializer_for_format("tensor", registry) is registry["tensor"]
    assert serializer_for_format("image:jpeg", registry) is registry["jpeg"]
    assert serializer_for_format("pickle:custom", registry) is registry["pickle"]
    # The shared registry entry is left unconfigured.
    assert registry["no_header_numpy"].dtype is None  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("data_format", "message"),
    [
        ("hologram:hg", r"unknown data format 'hologram:hg'; known serializers: str, text, bool, .*pickle"),
        ("nope", r"unknown data format 'nope'"),
        ("no_header_numpy", r"lacks a dtype index"),
        ("no_header_numpy:x", r"lacks a dtype index"),
        ("no_header_numpy:14", r"unsupported NumPy dtype index 14"),
        ("no_header_tensor:21", r"unknown torch dtype index 21"),
    ],
)
def test_serializer_for_format_errors(data_format: str, message: str) -> None:
    with pytest.raises(FormatError, match=message) as info:
        serializer_for_format(data_format, default_serializers())
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.uint32, torch.uint64])
@pytest.mark.parametrize("shape", [(3,), (2, 2)])
def test_unsupported_tensor_dtypes_raise(dtype: torch.dtype, shape: tuple[int, ...]) -> None:
    tensor = torch.zeros(shape, dtype=dtype)
    serializer = select_serializer(tensor, default_serializers())
    with pytest.raises(FormatError, match=rf"dtype {dtype}; supported dtypes: float32, float64") as info:
        serializer.serialize(tensor)
    assert "uint16" in str(info.value)


@pytest.mark.parametrize(
    "array", [np.array([["a"]], dtype=object), np.array(["ab", "c"]), np.array([b"x"]), np.zeros(2, "M8[s]")]
)
def test_unsupported_numpy_dtypes_raise(array: np.ndarray[Any, Any]) -> None:
    serializer = select_serializer(array, default_serializers())
    with pytest.raises(FormatError, match=re.escape(f"dtype {array.dtype}; supported dtypes: int8, ")):
        serializer.serialize(array)


def test_big_endian_numpy_is_stored_little_endian() -> None:
    registry = default_serializers()
    big = np.arange(6, dtype=">i4").reshape(2, 3)
    payload, _ = registry["numpy"].serialize(big)
    assert payload == registry["numpy"].serialize(big.astype("<i4"))[0]
    decoded = registry["numpy"].deserialize(payload)
    assert decoded.dtype == np.dtype("<i4")
    assert decoded.tolist() == [[0, 1, 2], [3, 4, 5]]
    flat, name = registry["no_header_numpy"].serialize(big[0])
    assert (flat, name) == (struct.pack("<3i", 0, 1, 2), "no_header_numpy:2")


def test_out_of_range_int_raises() -> None:
    with pytest.raises(FormatError, match=r"int 9223372036854775808 does not fit in int64"):
        default_serializers()["int"].serialize(2**63)


def test_unpicklable_raises() -> None:
    with pytest.raises(FormatError, match=r"cannot pickle an object of type"):
        PickleSerializer().serialize(lambda: None)


@pytest.mark.parametrize(
    ("data_format", "payload", "message"),
    [
        ("bool", b"", r"bool payload must be 1 byte, got 0"),
        ("int", b"\x00" * 7, r"int payload must be 8 bytes, got 7"),
        ("float", b"\x00" * 9, r"float payload must be 8 bytes, got 9"),
        ("str", b"\xff", r"not valid UTF-8"),
        ("no_header_numpy:3", b"\x00" * 5, r"5 data bytes is not a multiple of the 8-byte item size"),
        ("no_header_tensor:16", b"\x00" * 6, r"6 data bytes is not a multiple of the 4-byte item size"),
        ("numpy", struct.pack("<3I", 10, 2, 4), r"truncated array header"),
        ("numpy", struct.pack("<4I", 10, 2, 2, 2) + b"\x00" * 8, r"8 data bytes do not match shape \(2, 2\)"),
        ("tensor", struct.pack(">2I", 1, 3), r"truncated array header"),
        ("tensor", struct.pack(">3I", 1, 1, 2) + b"\x00" * 12, r"12 data bytes do not match shape \(2,\)"),
        ("tensor", struct.pack(">2I", 99, 0), r"unknown torch dtype index 99"),
        ("pil", b"\x01\x00", r"pil payload too short \(2 bytes\)"),
        ("pil", struct.pack("<3I", 2, 2, 1) + b"L" + b"\x00", r"invalid pil payload"),
        ("jpeg", b"not a jpeg", r"invalid jpeg payload"),
        ("pickle", b"\x80\x04", r"invalid pickle payload"),
    ],
)
def test_malformed_payloads_raise(data_format: str, payload: bytes, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        serializer_for_format(data_format, default_serializers()).deserialize(payload)


@pytest.mark.parametrize("serializer", [NoHeaderNumpySerializer(), NoHeaderTensorSerializer()])
def test_no_header_without_setup_raises(serializer: Serializer) -> None:
    with pytest.raises(FormatError, match=r"needs setup\("):
        serializer.deserialize(b"\x00" * 8)


@pytest.mark.parametrize(
    "value",
    [
        np.arange(4, dtype=np.float32),
        np.arange(6, dtype=np.int16).reshape(2, 3),
        torch.arange(4, dtype=torch.float32),
        torch.arange(6, dtype=torch.int64).reshape(2, 3),
        torch.tensor(3),
    ],
    ids=["np1d", "np2d", "t1d", "t2d", "t0d"],
)
def test_decoded_arrays_are_writable_copies(value: Any) -> None:
    registry = default_serializers()
    serializer = select_serializer(value, registry)
    payload, name = serializer.serialize(value)
    source = bytes(payload)
    decoded = serializer_for_format(name or serializer.name, registry).deserialize(source)
    if isinstance(decoded, np.ndarray):
        assert decoded.flags.writeable
    decoded += 1  # no "non-writable buffer" warning: warnings are errors
    expected = value + 1
    assert_same(decoded, expected)
    assert source == payload


def test_decoded_images_are_writable() -> None:
    registry = default_serializers()
    image = registry["pil"].deserialize(registry["pil"].serialize(_pil("RGB"))[0])
    image.putpixel((0, 0), (9, 8, 7))
    assert image.getpixel((0, 0)) == (9, 8, 7)
    pixels = registry["jpeg"].deserialize(_jpeg())
    pixels[0, 0, 0] = 3
    assert int(pixels[0, 0, 0]) == 3


def test_decodes_from_a_memoryview_slice() -> None:
    registry = default_serializers()
    values: list[Any] = ["ü", True, 7, 1.25, b"ab", np.arange(3.0), np.ones((2, 2)), torch.arange(3)]
    values += [torch.ones((2, 1)), _pil("L"), {"k": 1}]
    for value in values:
        serializer = select_serializer(value, registry)
        payload, name = serializer.serialize(value)
        window = memoryview(b"##" + payload + b"##")[2:-2]
        assert_same(serializer_for_format(name or serializer.name, registry).deserialize(window), value)


def test_tensor_on_autograd_and_conjugate_views() -> None:
    registry = default_serializers()
    leaf = torch.arange(3, dtype=torch.float32, requires_grad=True)
    assert registry["no_header_tensor"].serialize(leaf) == (struct.pack("<3f", 0, 1, 2), "no_header_tensor:1")
    conj = torch.tensor([[1 + 2j]], dtype=torch.complex64).conj()
    payload, _ = registry["tensor"].serialize(conj)
    assert payload == struct.pack(">4I", 5, 2, 1, 1) + struct.pack("<2f", 1, -2)


def test_pil_is_imported_lazily() -> None:
    code = "import sys, litstream.format._serializers as s; s.default_serializers(); print('PIL' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert result.stdout.strip() == "False"


# --- property tests -------------------------------------------------------------------------------------


def _round_trip(value: Any) -> tuple[str, Any]:
    registry = default_serializers()
    serializer = select_serializer(value, registry)
    payload, name = serializer.serialize(value)
    recorded = name or serializer.name
    return recorded, serializer_for_format(recorded, registry).deserialize(payload)


@settings(max_examples=150, deadline=None, database=None)
@given(
    hnp.arrays(
        dtype=st.sampled_from([np.dtype(d) for d in NUMPY_DTYPES]),
        shape=hnp.array_shapes(min_dims=1, max_dims=4, min_side=0, max_side=4),
    )
)
def test_numpy_round_trip(array: np.ndarray[Any, Any]) -> None:
    recorded, decoded = _round_trip(array)
    assert recorded.split(":")[0] == ("no_header_numpy" if array.ndim == 1 else "numpy")
    assert_same(decoded, array)
    assert decoded.flags.writeable


@settings(max_examples=150, deadline=None, database=None)
@given(
    hnp.arrays(
        dtype=st.sampled_from([np.dtype(d) for d in TORCH_NUMPY_DTYPES]),
        shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=4),
    )
)
def test_tensor_round_trip(array: np.ndarray[Any, Any]) -> None:
    tensor = torch.from_numpy(array.copy())
    recorded, decoded = _round_trip(tensor)
    assert recorded.split(":")[0] == ("no_header_tensor" if tensor.ndim == 1 else "tensor")
    assert_same(decoded, tensor)


@pytest.mark.litdata
@settings(max_examples=100, deadline=None, database=None)
@given(
    hnp.arrays(
        dtype=st.sampled_from([np.dtype(d) for d in TORCH_NUMPY_DTYPES]),
        shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3),
    )
)
def test_array_bytes_match_litdata(array: np.ndarray[Any, Any]) -> None:
    litdata = require_peer("litdata.streaming.serializers")
    tensor = torch.from_numpy(array.copy())
    for value in (array, tensor):
        ours = select_serializer(value, default_serializers())
        if ours.name == "pickle":  # 0-d NumPy arrays
            continue
        assert ours.serialize(value) == getattr(litdata, LITDATA_CLASSES[ours.name])().serialize(value)


@settings(max_examples=100, deadline=None, database=None)
@given(
    st.one_of(
        st.booleans(),
        st.integers(min_value=-(2**63), max_value=2**63 - 1),
        st.text(),
        st.binary(),
        st.dictionaries(st.text(max_size=3), st.integers()),
    )
)
def test_scalar_round_trip(value: Any) -> None:
    assert_same(_round_trip(value)[1], value)


@settings(max_examples=100, deadline=None, database=None)
@given(st.floats())
def test_float_round_trip_is_bit_exact(value: float) -> None:
    recorded, decoded = _round_trip(value)
    assert recorded == "float"
    assert struct.pack("<d", decoded) == struct.pack("<d", value)


@settings(max_examples=50, deadline=None, database=None)
@given(
    st.sampled_from(["L", "RGB", "RGBA", "I;16", "F", "1"]),
    st.integers(min_value=0, max_value=6),
    st.integers(min_value=0, max_value=6),
)
def test_pil_round_trip(mode: str, width: int, height: int) -> None:
    image = Image.new(mode, (width, height))
    if width and height:
        image.putpixel((width - 1, height - 1), 1 if mode in ("1", "L", "I;16", "F") else (1,) * len(mode))
    recorded, decoded = _round_trip(image)
    assert recorded == "pil"
    assert_same(decoded, image)


def test_serializer_instances_pickle() -> None:
    import pickle

    configured = serializer_for_format("no_header_tensor:9", default_serializers())
    clone = pickle.loads(pickle.dumps(configured))
    assert isinstance(clone, NoHeaderTensorSerializer)
    assert clone.dtype == torch.float16
    assert repr(clone) == "NoHeaderTensorRefSerializer(dtype=torch.float16)"  # also takes Tensor wrappers
    assert repr(TensorSerializer()) == "TensorSerializer()"


# --- the lean reader registry (format/_loaders._reader_registry) -------------------------------------------


def test_media_keys_are_what_the_media_registry_adds_or_replaces() -> None:
    full, lean = default_serializers(), default_serializers(media=False)
    changed = {key for key, value in full.items() if key not in lean or type(value) is not type(lean[key])}
    assert changed == MEDIA_KEYS
    assert list(lean) == [key for key in full if key in lean]  # the core keys keep their order


_CORE_FORMATS = [k + ":10" if k.startswith("no_header") else k for k in sorted(default_serializers(media=False))]


@pytest.mark.parametrize(
    "data_format",
    [*_CORE_FORMATS, "pickle:custom", "image:jpeg", "numpy:audio", "no_header_tensor:18", "audio", "jpeg_array",
     "str:text"],
)  # fmt: skip
def test_the_reader_registry_resolves_every_format_as_the_full_one(data_format: str) -> None:
    registry = _reader_registry(None, ["int", data_format])
    expected = serializer_for_format(data_format, default_serializers())
    got = serializer_for_format(data_format, registry)
    assert type(got) is type(expected)
    assert getattr(got, "dtype", None) == getattr(expected, "dtype", None)
    names_media = any(part in MEDIA_KEYS for part in data_format.split(":"))
    assert ("audio" in registry) is names_media  # the media encodings only when a format names one


@pytest.mark.parametrize(("formats", "imported"), [(["numpy", "int", "str"], False), (["numpy", "video"], True)])
def test_media_modules_are_imported_only_for_a_format_that_names_one(formats: list[str], imported: bool) -> None:
    code = (
        "import sys; from litstream.format._loaders import _reader_registry; "
        f"_reader_registry(None, {formats!r}); print('litstream.format.media._audio' in sys.modules)"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert result.stdout.strip() == str(imported)


def test_an_unknown_format_still_lists_every_known_serializer() -> None:
    with pytest.raises(FormatError, match=r"unknown data format 'hologram'; known serializers: str, text, .*audio"):
        serializer_for_format("hologram", _reader_registry(None, ["hologram"]))
