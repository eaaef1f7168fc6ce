"""Every media wrapper, serializer by serializer, against LitData 0.2.76's own serializers.

For each case both libraries build the same value from their own wrapper classes; the test checks
that each picks the same encoding, records the same ``data_format`` and writes the same payload, and
that each library decodes the other's payload to the same value (where LitData can decode here:
its image, audio and video decoders need torchvision / torchcodec, so those payloads are decoded
with litstream's decoder on both and compared with the source values in the dataset-level tests).

Inputs are real files that packages ship (nibabel's NIfTI samples, matplotlib's PDFs, the standard
library's sources) or generated here and labelled synthetic (pixel ramps, sine tones, a box mesh).
"""

from __future__ import annotations

import io
import os
import string
import wave
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
import torch
from PIL import Image as PILImage

import litstream
from litstream.format._serializers import default_serializers, select_serializer, serializer_for_format
from litstream.format.media._video import VideoSerializer
from peer import require_dev, require_peer
from pyg_block import block_torch_geometric

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

litdata = require_peer("litdata")
lds = require_peer("litdata.streaming.serializers")
nib = require_dev("nibabel")
trimesh = require_dev("trimesh")
pdfplumber = require_dev("pdfplumber")
matplotlib = require_dev("matplotlib")

pytestmark = pytest.mark.litdata


@pytest.fixture(autouse=True)
def _without_torch_geometric(monkeypatch: pytest.MonkeyPatch) -> None:
    """Graphs decode to ``Graph`` (the path without PyG) even where PyG is installed (test_graph_collate_compat.py)."""
    block_torch_geometric(monkeypatch)


NIFTI_GZ = os.path.join(os.path.dirname(str(nib.__file__)), "tests", "data", "example4d.nii.gz")
NIFTI = os.path.join(os.path.dirname(str(nib.__file__)), "tests", "data", "anatomical.nii")
PDF = os.path.join(os.path.dirname(str(matplotlib.__file__)), "mpl-data", "images", "home.pdf")
TEXT = string.__file__


def _ramp(h: int = 12, w: int = 20, c: int = 3) -> np.ndarray:
    """Synthetic pixels."""
    return ((np.arange(h * w * c).reshape(h, w, c) * 5) % 256).astype(np.uint8)


_OPENED: list[Any] = []


def _opened(obj: Any) -> Any:
    _OPENED.append(obj)
    return obj


def _open(path: str) -> Any:
    return _opened(PILImage.open(path))


def open_bytes(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


@pytest.fixture(autouse=True)
def _close_opened() -> Any:
    yield
    while _OPENED:
        _OPENED.pop().close()


def _encoded(fmt: str, **options: Any) -> bytes:
    buffer = io.BytesIO()
    PILImage.fromarray(_ramp()).save(buffer, format=fmt, **options)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("media-files")
    out = {
        "png": root / "ramp.png",
        "jpg": root / "ramp.jpg",
        "jpg98": root / "ramp98.jpg",
        "pcm": root / "tone.pcm",
        "wav": root / "tone.wav",
        "glb": root / "box.glb",
    }
    out["png"].write_bytes(_encoded("PNG"))
    out["jpg"].write_bytes(_encoded("JPEG", quality=75))
    out["jpg98"].write_bytes(_encoded("JPEG", quality=98))
    tone = (0.3 * np.sin(np.arange(400) / 5.0) * 32767).astype("<i2")  # synthetic
    out["pcm"].write_bytes(tone.tobytes())
    with wave.open(str(out["wav"]), "wb") as handle:
        handle.setnchannels(1)
        handle.setsampwidth(2)
        handle.setframerate(8000)
        handle.writeframes(tone.tobytes())
    out["flac"] = root / "tone.flac"
    require_dev("soundfile").write(str(out["flac"]), tone, 8000)
    out["glb"].write_bytes(trimesh.creation.box(extents=(1, 2, 3)).export(file_type="glb"))
    return {key: str(path) for key, path in out.items()}


# Each case: (id, builder(lib, files) -> value, decodable by LitData here).
CASES: list[tuple[str, Callable[[Any, dict[str, str]], Any], bool]] = [
    ("text-text", lambda L, f: L.Text(text="caf\u00e9 \u2615"), True),
    ("text-bytes", lambda L, f: L.Text(bytes=b"plain"), True),
    ("text-path", lambda L, f: L.Text(path=TEXT), True),
    ("file-path", lambda L, f: L.File(path=TEXT), True),
    ("file-bytes-path", lambda L, f: L.File(bytes=b"\x00\x01", path="blob.BIN"), True),
    ("file-bytes", lambda L, f: L.File(bytes=b"\x00\x01"), True),
    ("image-array-png", lambda L, f: L.Image(array=_ramp()), False),
    ("image-array-jpeg-q", lambda L, f: L.Image(array=_ramp(), format="jpeg", quality=80), False),
    ("image-float-array", lambda L, f: L.Image(array=_ramp().astype(np.float32) / 255.0), False),
    ("image-u16-2d", lambda L, f: L.Image(array=_ramp()[..., 0].astype(np.uint16) * 200), False),
    ("image-pil", lambda L, f: L.Image(image=_open(f["png"])), False),
    ("image-path", lambda L, f: L.Image(path=f["png"]), False),
    ("image-path-cap", lambda L, f: L.Image(path=f["png"], max_quality=90), False),
    ("image-jpeg-under-cap", lambda L, f: L.Image(path=f["jpg"], max_quality=90), False),
    ("image-mode", lambda L, f: L.Image(path=f["png"], mode="L"), False),
    ("image-bare-path", lambda L, f: f["png"], False),
    ("jpeg-array", lambda L, f: L.Jpeg(array=_ramp()), False),
    ("jpeg-q98-capped", lambda L, f: L.Jpeg(path=f["jpg98"]), False),
    ("jpeg-q75-kept", lambda L, f: L.Jpeg(path=f["jpg"]), False),
    ("jpeg-quality", lambda L, f: L.Jpeg(path=f["jpg"], quality=50), False),
    ("jpeg-pil-file", lambda L, f: L.Jpeg(image=_open(f["jpg98"])), False),
    ("jpeg-bare-file", lambda L, f: _open(f["jpg"]), False),
    (
        "jpeg-array-mixed",
        lambda L, f: L.JpegArray(
            images=[L.Jpeg(array=_ramp()), L.Image(path=f["png"]), f["jpg"], _open(f["png"]), _encoded("JPEG")],
            quality=70,
        ),
        False,
    ),
    ("jpeg-array-cap", lambda L, f: L.JpegArray(images=[L.Jpeg(path=f["jpg98"]), L.Jpeg(path=f["jpg"])]), False),
    ("jpeg-list", lambda L, f: [_open(f["jpg"]), _open(f["jpg98"])], False),
    ("pil-array", lambda L, f: L.Pil(array=_ramp()), True),
    ("pil-path-mode", lambda L, f: L.Pil(path=f["png"], mode="RGBA"), False),  # LitData: image claims .png paths
    ("pil-image", lambda L, f: L.Pil(image=PILImage.fromarray(_ramp(c=1)[..., 0])), True),
    ("tiff-array", lambda L, f: L.Tiff(array=np.arange(20, dtype=np.float32).reshape(4, 5)), True),
    ("tensor-2d", lambda L, f: L.Tensor(array=np.ones((2, 3)), dtype=torch.float16), True),
    ("tensor-1d", lambda L, f: L.Tensor(array=torch.arange(7)), True),
    ("tensor-0d", lambda L, f: L.Tensor(array=torch.tensor(3.5)), True),
    ("tensor-raw", lambda L, f: L.Tensor(bytes=np.arange(3, dtype="<f8").tobytes(), dtype=torch.float64), True),
    ("audio-mono", lambda L, f: L.Audio(array=np.sin(np.arange(300) / 3.0), sampling_rate=16000), False),
    ("audio-stereo", lambda L, f: L.Audio(array=np.stack([np.ones(50), -np.ones(50) * 2]), sampling_rate=8000), False),
    ("audio-pcm", lambda L, f: L.Audio(path=f["pcm"], sampling_rate=8000), False),
    ("audio-bytes-flac", lambda L, f: L.Audio(bytes=open_bytes(f["flac"]), path="x.flac"), False),
    ("audio-bare-path", lambda L, f: f["wav"], False),
    ("nifti-array", lambda L, f: L.Nifti(array=np.arange(24, dtype=np.float32).reshape(2, 3, 4)), True),
    ("nifti-path-gz", lambda L, f: L.Nifti(path=NIFTI_GZ), True),
    ("nifti-image-file", lambda L, f: nib.load(NIFTI_GZ), True),
    ("nifti-bare-path", lambda L, f: NIFTI, True),
    ("mesh-object", lambda L, f: L.Mesh(mesh=trimesh.creation.box(extents=(1, 2, 3))), True),
    ("mesh-stl", lambda L, f: L.Mesh(mesh=trimesh.creation.box(extents=(1, 2, 3)), file_type="stl"), True),
    ("mesh-path", lambda L, f: L.Mesh(path=f["glb"]), True),
    ("pdf-path", lambda L, f: L.Pdf(path=PDF), True),
    ("pdf-plumber", lambda L, f: _opened(pdfplumber.open(PDF)), True),
    (
        "graph-fields",
        lambda L, f: L.Graph(x=torch.arange(6.0).reshape(3, 2), edge_index=torch.tensor([[0, 1], [1, 2]]), y=3),
        True,
    ),
    (
        "graph-dict",
        lambda L, f: L.Graph(data={"x": np.ones((2, 2)), "num_nodes": 2, "meta": {"w": torch.ones(1), "n": "a"}}),
        True,
    ),
    ("graph-opaque", lambda L, f: L.Graph(data=("a", 1)), True),
    ("video-bytes", lambda L, f: L.Video(bytes=b"\x00\x00\x00\x18ftypmp42", path="clip.WEBM"), False),  # not decoded
]


def _litdata_write(value: Any) -> tuple[str, bytes, Any]:
    for key, serializer in lds._get_serializers(None).items():
        if serializer.can_serialize(value):
            payload, name = serializer.serialize(value)
            return name or key, bytes(payload), serializer
    raise AssertionError("LitData's pickle serializer accepts everything")


def _litstream_write(value: Any) -> tuple[str, bytes]:
    serializer = select_serializer(value, default_serializers())
    payload, name = serializer.serialize(value)
    return name or serializer.name, payload


def _litdata_read(data_format: str, payload: bytes) -> Any:
    serializers = lds._get_serializers(None)
    head, _, tail = data_format.partition(":")
    serializer = serializers[tail if tail in serializers else head]
    serializer.setup(data_format)
    return serializer.deserialize(payload)


def _litstream_read(data_format: str, payload: bytes) -> Any:
    if data_format.startswith("video"):  # decoding needs torchcodec; the bytes are what is compared
        return VideoSerializer(decode="bytes").deserialize(memoryview(payload))
    return serializer_for_format(data_format, default_serializers()).deserialize(memoryview(payload))


def _comparable(value: Any) -> Any:
    """A plain, comparable form of a decoded leaf."""
    if isinstance(value, torch.Tensor):
        return ("tensor", str(value.dtype), tuple(value.shape), value.tolist())
    if isinstance(value, np.ndarray):
        return ("array", str(value.dtype), value.shape, value.tolist())
    if isinstance(value, PILImage.Image):
        return ("pil", value.mode, value.size, value.tobytes())
    if isinstance(value, nib.Nifti1Image):
        return ("nifti", _comparable(np.asarray(value.dataobj)), value.affine.tolist())
    if isinstance(value, trimesh.Trimesh):
        return ("mesh", np.round(value.bounds, 6).tolist(), len(value.vertices))
    if isinstance(value, trimesh.Scene):
        return ("mesh", np.round(value.bounds, 6).tolist(), len(value.to_geometry().vertices))
    if type(value).__name__ == "DecodedAudio":
        return ("audio", value.samples.tolist(), value.sampling_rate)
    if isinstance(value, (list, tuple)):
        return [_comparable(v) for v in value]
    if isinstance(value, pdfplumber.PDF):
        result = ("pdf", [p.bbox for p in value.pages], len(value.pages[0].curves))
        value.close()
        return result
    if type(value).__name__ == "Graph":
        fields = {k: _comparable(getattr(value, k)) for k in ("x", "edge_index", "edge_attr", "y", "pos", "batch")}
        return ("graph", fields, _comparable(value.data))
    if isinstance(value, dict):
        return {k: _comparable(v) for k, v in value.items()}
    if isinstance(value, memoryview):
        return bytes(value)
    return value


@pytest.mark.parametrize(("build", "litdata_decodes"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_same_encoding_as_litdata(
    files: dict[str, str], build: Callable[[Any, dict[str, str]], Any], litdata_decodes: bool
) -> None:
    theirs_format, theirs, _ = _litdata_write(build(litdata, files))
    ours_format, ours = _litstream_write(build(litstream, files))
    if theirs_format == "tiff":  # LitData's own reader cannot resolve "tiff"; litstream writes "tifffile"
        assert ours_format == "tifffile"
    else:
        assert ours_format == theirs_format
    assert ours == theirs
    ours_decoded = _comparable(_litstream_read(ours_format, ours))
    assert _comparable(_litstream_read(theirs_format, theirs)) == ours_decoded
    if litdata_decodes and theirs_format != "graph:pickle":
        assert _comparable(_litdata_read(ours_format, ours)) == ours_decoded


def test_bare_paths_claimed_as_litdata_claims(files: dict[str, str], tmp_path: Path) -> None:
    """Media extensions of existing files are media; captions, missing files and other files are strings."""
    for name in ("notes.txt", "arr.npy", "brain.nii.gz.bak"):
        (tmp_path / name).write_bytes(b"x")
    registry = default_serializers()
    claims = {
        files["png"]: "image",
        files["jpg"]: "image",
        files["wav"]: "audio",
        files["glb"]: "mesh",
        NIFTI_GZ: "nifti",
        PDF: "pdf",
        str(tmp_path / "notes.txt"): "str",  # LitData pickles it: a string either way
        str(tmp_path / "arr.npy"): "str",
        str(tmp_path / "brain.nii.gz.bak"): "str",
        "a caption that ends in .jpg": "str",
        str(tmp_path / "missing.png"): "str",
    }
    for value, key in claims.items():
        assert select_serializer(value, registry).name == key, value
        ours, theirs = _litstream_write(value)[0], _litdata_write(value)[0]
        if key == "str":
            assert ours == "str"
            assert theirs == ("pickle" if os.path.isfile(value) else "str"), value
        else:
            assert ours == theirs, value


def test_a_str_column_keeps_later_media_paths_as_strings(files: dict[str, str]) -> None:
    from litstream.format._loaders import SampleEncoder

    encoder = SampleEncoder()
    encoder.encode({"s": "a caption"})
    item = encoder.encode({"s": files["png"]})
    assert encoder.data_format == ("str",)
    assert item.endswith(files["png"].encode())


def test_an_image_column_takes_other_image_kinds(files: dict[str, str]) -> None:
    from litstream.format._loaders import SampleEncoder

    encoder = SampleEncoder()
    encoder.encode({"img": files["png"]})
    encoder.encode({"img": files["jpg"]})  # recorded as image:jpg, stored in the image:png column as LitData does
    assert encoder.data_format == ("image:png",)
    with pytest.raises(litstream.FormatError, match=r"encodes as 'mesh:stl' but the first sample fixed 'mesh:glb'"):
        mesh = SampleEncoder()
        mesh.encode(litstream.Mesh(path=files["glb"]))
        mesh.encode(litstream.Mesh(mesh=trimesh.creation.box(), file_type="stl"))


@pytest.mark.parametrize("build", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_litdata_wrappers_are_written_as_litstream_wrappers(
    files: dict[str, str], build: Callable[[Any, dict[str, str]], Any]
) -> None:
    """``litdata.Image(...)`` given to litstream is stored as ``litstream.Image(...)`` is, never pickled."""
    ours_format, ours = _litstream_write(build(litstream, files))
    assert _litstream_write(build(litdata, files)) == (ours_format, ours)
    assert ours_format != "pickle"


def test_litdata_wrappers_in_optimize(tmp_path: Path) -> None:
    litstream.optimize(_litdata_wrapped, [0, 1], tmp_path / "out", chunk_bytes="1MB", num_workers=1, verbose=False)
    ds = litstream.StreamingDataset(tmp_path / "out", shuffle=False)
    assert [ds[i]["caption"] for i in range(2)] == ["caption 0", "caption 1"]
    assert ds[1]["ids"].tolist() == [0, 1, 2]


def _litdata_wrapped(i: int) -> dict[str, Any]:
    return {"caption": litdata.Text(text=f"caption {i}"), "ids": litdata.Tensor(array=torch.arange(3))}


@pytest.mark.parametrize(
    "options",
    [{"quality": q} for q in (1, 10, 49, 50, 75, 90, 95, 96, 100)]
    + [{"quality": "web_high"}, {"qtables": [[3 * (i % 7) + 1 for i in range(64)]]}],
)
def test_jpeg_quality_estimate_matches_litdata(options: dict[str, Any]) -> None:
    from litstream.format.media._image_codec import estimate_jpeg_quality, keep_jpeg_under

    data = _encoded("JPEG", **options)
    assert estimate_jpeg_quality(data) == lds._estimate_jpeg_quality(data)
    for cap in (50, 90, 95):
        assert keep_jpeg_under(data, cap) == lds._keep_jpeg_under_max_quality(data, cap)
    assert estimate_jpeg_quality(_encoded("PNG")) is None


def test_bare_pdf_bytes_stay_bytes() -> None:
    """A documented difference: LitData stores bytes that start with %PDF as "pdf" (decoded by pdfplumber)."""
    data = open_bytes(PDF)
    assert _litdata_write(data)[:2] == ("pdf", data)
    assert _litstream_write(data) == ("bytes", data)
    assert _litstream_read("bytes", data) == data
    assert _litdata_read("bytes", data) == data
    with _litstream_read("pdf", data) as pdf:  # and LitData's "pdf" leaves read as LitData reads them
        assert len(pdf.pages) == 1
