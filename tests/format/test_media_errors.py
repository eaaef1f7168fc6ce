"""Media wrappers and encodings: what they refuse, malformed payloads, and missing optional extras."""

from __future__ import annotations

import io
import pickle
import struct
import sys
import wave

import numpy as np
import pytest
import torch

import litstream
from litstream import FormatError
from litstream.format._serializers import default_serializers, select_serializer
from litstream.format.media._audio import AudioSerializer, encode_wav
from litstream.format.media._graph import GraphSerializer
from litstream.format.media._image import JpegArraySerializer, TiffSerializer
from litstream.format.media._mesh import MeshSerializer, PdfSerializer
from litstream.format.media._nifti import NiftiSerializer
from litstream.format.media._text import TextSerializer
from litstream.format.media._video import VideoSerializer
from pyg_block import block_torch_geometric


def _serialize(value: object) -> tuple[bytes, str | None]:
    return select_serializer(value, default_serializers()).serialize(value)


def test_empty_text_is_refused_with_the_fix() -> None:
    with pytest.raises(FormatError, match=r"Text\(\) is empty: pass text='...', bytes=b'...' \(UTF-8\) or path="):
        _serialize(litstream.Text())


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: litstream.Image(quality=80, max_quality=90), r"Image\(quality=80, max_quality=90\): set only one"),
        (lambda: litstream.Jpeg(quality=80, max_quality=90), r"Jpeg\(quality=80, max_quality=90\)"),
        (lambda: litstream.JpegArray(quality=80, max_quality=90), r"JpegArray\(quality=80"),
        (lambda: litstream.Audio(bytes="not bytes"), r"Audio\(bytes=...\) must be bytes or bytearray, got str"),  # type: ignore[arg-type]
    ],
)
def test_wrapper_arguments_are_checked(build: object, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        build()  # type: ignore[operator]


def test_wrapper_defaults_follow_litdata() -> None:
    assert litstream.Jpeg().max_quality == 95
    assert litstream.Jpeg(quality=80).max_quality is None
    assert litstream.JpegArray().max_quality == 95
    assert litstream.Image().max_quality is None
    assert litstream.Text(path=__import__("pathlib").Path("a.txt")).path == "a.txt"
    assert litstream.File(bytes=bytearray(b"ab")).bytes == b"ab"  # type: ignore[arg-type]  # accepted, kept as bytes
    assert litstream.Tensor(array=np.zeros((2, 3))).shape == (2, 3)
    with pytest.raises(AttributeError, match=r"Tensor.shape needs array="):
        _ = litstream.Tensor(bytes=b"").shape


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (litstream.Tensor(bytes=b"\x00" * 4), r"needs dtype="),
        (litstream.Tensor(bytes=b"\x00" * 3, dtype=torch.int32), r"3 bytes is not a whole number of torch.int32"),
        (litstream.Audio(array=np.zeros(4)), r"Audio\(array=...\) needs sampling_rate="),
        (litstream.Audio(path="a.pcm", bytes=b"\x00\x00"), r"a .pcm file needs Audio\(sampling_rate=...\)"),
        (litstream.JpegArray(images=[]), r"JpegArray\(images=\[\]\) is empty"),
        (litstream.Image(path="/no/such/dir/x.png"), r"cannot read media file '/no/such/dir/x.png'"),
        (litstream.File(), r"File needs path= or bytes="),
        (litstream.Video(array=np.zeros((1, 3, 3, 3))), r"needs an even height and width"),
        (litstream.Video(array=np.zeros((4, 4, 3))), r"\(N, C, H, W\), got shape \(4, 4, 3\)"),
        (litstream.Video(array=np.zeros((2, 4, 4, 2))), r"1 or 3 channels"),
        (litstream.Video(array=np.zeros((2, 4, 4, 3)), fps=0.4), r"Video\(fps=0.4\) must round to at least 1"),
        (litstream.Mesh(bytes=b"solid", path="m.obj"), r"must end in .glb, .ply or .stl, got 'obj'"),
        (litstream.Graph(x=torch.ones(1), data=object()), r"cannot be combined with tensor fields \(x\)"),
    ],
)
def test_values_that_cannot_be_written(value: object, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        _serialize(value)


def test_serializer_options_are_checked() -> None:
    with pytest.raises(FormatError, match=r"AudioSerializer\(decode='frames'\)"):
        AudioSerializer(decode="frames")
    with pytest.raises(FormatError, match=r"VideoSerializer\(decode='frames'\)"):
        VideoSerializer(decode="frames")
    with pytest.raises(FormatError, match=r"seek_mode='fast'"):
        VideoSerializer(seek_mode="fast")


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"\x01\x00", r"has no image count"),
        (struct.pack("<I", 0), r"cannot hold 0 images"),
        (struct.pack("<I", 5) + b"\x00" * 8, r"cannot hold 5 images"),
        (struct.pack("<II", 1, 100) + b"\xff\xd8", r"sizes add up past the end"),
        (struct.pack("<II", 1, 2) + b"no", r"invalid image payload"),
    ],
)
def test_malformed_jpeg_array_payloads(payload: bytes, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        JpegArraySerializer().deserialize(payload)


def test_text_payload_must_be_utf8() -> None:
    with pytest.raises(FormatError, match=r"text payload is not valid UTF-8"):
        TextSerializer().deserialize(b"\xff\xfe")


class _Boom:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (print, ("this must never run",))


def _graph_payload(meta: bytes, version: int = 3) -> bytes:
    field = struct.pack(">H", 5) + b"_meta" + struct.pack(">BI", 1, len(meta)) + meta
    return b"LDGR" + struct.pack(">BH", version, 1) + field


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        (b"PK\x03\x04", r"does not start with b'LDGR'"),
        (b"LDGR\x09\x00\x00", r"unsupported graph pack version 9"),
        (b"LDGR\x03\x00\x02\x00", r"invalid graph payload"),
        (_graph_payload(pickle.dumps(_Boom())), r"graph metadata refers to builtins.print"),
        (_graph_payload(pickle.dumps([1, 2])), r"graph metadata is not a dict"),
        (_graph_payload(pickle.dumps({}))[:-3], r"runs past the end"),
    ],
)
def test_graph_payloads_are_checked_and_never_run_code(
    payload: bytes, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(FormatError, match=message):
        GraphSerializer().deserialize(payload)
    assert "must never run" not in capsys.readouterr().out


def test_graph_round_trip_without_pyg_keeps_non_tensor_values(monkeypatch: pytest.MonkeyPatch) -> None:
    block_torch_geometric(monkeypatch)  # the path without PyG
    flat = litstream.Graph(data={"x": torch.ones(2, 2), "num_nodes": 2, "extra": {"tag": "a"}})
    payload, name = GraphSerializer().serialize(flat)
    assert name == "graph"
    decoded = GraphSerializer().deserialize(payload)
    assert torch.equal(decoded.x, torch.ones(2, 2))
    assert decoded.data == {"num_nodes": 2, "extra": {"tag": "a"}}
    # A dict holding tensors makes it heterogeneous (LitData's rule): everything stays in ``data``.
    hetero = litstream.Graph(data={"x": torch.ones(2, 2), "paper": {"w": np.arange(3), "tag": "a"}})
    decoded = GraphSerializer().deserialize(GraphSerializer().serialize(hetero)[0])
    assert decoded.x is None
    assert torch.equal(decoded.data["x"], torch.ones(2, 2))
    assert torch.equal(decoded.data["paper"]["w"], torch.arange(3))
    assert decoded.data["paper"]["tag"] == "a"


def _wav() -> bytes:
    return encode_wav(np.array([0.0, 0.5, -0.5, 1.0]), 8000)


@pytest.mark.parametrize(
    ("decode", "module", "extra"),
    [
        (lambda: AudioSerializer().deserialize(b"fLaC" + b"\x00" * 40), "soundfile", "audio"),
        (lambda: VideoSerializer().deserialize(b"\x00" * 8), "torchcodec", "video"),
        (lambda: VideoSerializer(decode="all").deserialize(b"\x00" * 8), "av", "video"),
        (lambda: NiftiSerializer().deserialize(b"\x00" * 8), "nibabel", "nifti"),
        (lambda: MeshSerializer().deserialize(b"\x00" * 8), "trimesh", "mesh"),
        (lambda: PdfSerializer().deserialize(b"%PDF"), "pdfplumber", "pdf"),
        (lambda: TiffSerializer().deserialize(b"II*\x00"), "tifffile", "tiff"),
    ],
)
def test_a_missing_extra_names_the_pip_install(
    monkeypatch: pytest.MonkeyPatch, decode: object, module: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # the package is absent: importing it fails
    monkeypatch.setitem(sys.modules, f"{module}.decoders", None)
    with pytest.raises(
        ModuleNotFoundError, match=rf"optional package '{module}'.*pip install \"litstream\[{extra}\]\""
    ):
        decode()  # type: ignore[operator]


def test_pcm_wav_decodes_without_soundfile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "soundfile", None)
    audio = AudioSerializer().deserialize(_wav())
    assert audio["sampling_rate"] == 8000
    assert audio["array"].dtype == np.float32
    assert audio["array"].tolist() == [0.0, 16383 / 32768, -16383 / 32768, 32767 / 32768]
    with wave.open(io.BytesIO(_wav())) as handle:
        assert (handle.getnchannels(), handle.getsampwidth(), handle.getnframes()) == (1, 2, 4)
    samples, rate = AudioSerializer(decode="samples").deserialize(_wav())
    assert rate == 8000
    assert tuple(samples.shape) == (1, 4)
    assert AudioSerializer(decode="bytes").deserialize(memoryview(_wav())) == _wav()
