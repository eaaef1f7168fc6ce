"""Media wrappers and encodings against LitData 0.2.76, in both directions, comparing decoded values.

Two samples cover every wrapper: ``core_sample`` (text, files, images, tensors, audio) and
``heavy_sample`` (NIfTI, mesh, PDF, graph, video, TIFF). LitData writes them and litstream reads;
litstream writes them and LitData reads; both libraries' readers run on the same dataset and their
decoded leaves are compared with each other and with the source values.

LitData decodes images with torchvision and audio / video with torchcodec, neither of which installs
beside the pinned torch: its reader gets serializers that decode images with Pillow (as litstream
does) and return audio / video bytes, which the test decodes with the same library on both sides.
Every input is real data a package ships (standard-library and matplotlib files) or generated here
and labelled synthetic (pixel ramps, a sine tone, a 4-frame MPEG-4 clip, a box mesh).
"""

from __future__ import annotations

import gc
import io
import json
import os
import shutil
import string
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

import litstream
from clean_litdata import litdata_optimize
from litstream.format.media._audio import AudioSerializer as LsAudio
from litstream.format.media._video import VideoSerializer as LsVideo
from peer import require_dev, require_peer

litdata = require_peer("litdata")
sf = require_dev("soundfile")
nib = require_dev("nibabel")
trimesh = require_dev("trimesh")
pdfplumber = require_dev("pdfplumber")
av = require_dev("av")
tifffile = require_dev("tifffile")
import matplotlib  # noqa: E402
from litdata.streaming import serializers as lds  # noqa: E402
from PIL import Image as PILImage  # noqa: E402

from pyg_block import block_torch_geometric  # noqa: E402

pytestmark = pytest.mark.litdata


@pytest.fixture(autouse=True)
def _without_torch_geometric(monkeypatch: pytest.MonkeyPatch) -> None:
    """Graphs decode to ``Graph`` (the path without PyG) even where PyG is installed (test_graph_collate_compat.py)."""
    block_torch_geometric(monkeypatch)


NUM = 3
TEXT_FILE = string.__file__  # a UTF-8 source file of the standard library
PDF_FILE = os.path.join(os.path.dirname(matplotlib.__file__), "mpl-data", "images", "home.pdf")


def _pixels(i: int, channels: int = 3) -> np.ndarray:
    """Synthetic: a 12 x 20 ramp, different per sample."""
    ramp = (np.arange(12 * 20 * channels, dtype=np.int64).reshape(12, 20, channels) * 7 + 31 * i) % 256
    return ramp.astype(np.uint8)


def _tone(i: int) -> np.ndarray:
    """Synthetic: 0.1 s of a (220 + 110 i) Hz sine at 8 kHz, amplitude 0.5."""
    return (0.5 * np.sin(2 * np.pi * (220 + 110 * i) * np.arange(800) / 8000)).astype(np.float32)


def _video_bytes(i: int) -> bytes:
    """Synthetic: 4 flat frames of 32 x 24 pixels, MPEG-4 in MP4, encoded with PyAV."""
    buffer = io.BytesIO()
    with av.open(buffer, "w", format="mp4") as container:
        stream = container.add_stream("mpeg4", rate=5)
        stream.width, stream.height, stream.pix_fmt = 32, 24, "yuv420p"
        for k in range(4):
            frame = av.VideoFrame.from_ndarray(np.full((24, 32, 3), 40 * k + 10 * i, np.uint8), format="rgb24")
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return buffer.getvalue()


def core_sample(i: int, lib: Any) -> dict[str, Any]:
    return {
        "caption": lib.Text(text=f"caption {i}: caf\u00e9"),
        "text_file": lib.Text(path=TEXT_FILE),
        "file": lib.File(path=TEXT_FILE),
        "png": lib.Image(array=_pixels(i)),
        "image_q": lib.Image(array=_pixels(i), format="jpeg", quality=90),
        "jpeg": lib.Jpeg(array=_pixels(i)),
        "jpeg_array": lib.JpegArray(images=[lib.Jpeg(array=_pixels(i)), lib.Jpeg(array=_pixels(i + 1), quality=60)]),
        "pil": lib.Pil(array=_pixels(i), mode="L"),
        "tensor_2d": lib.Tensor(array=np.arange(6 * (i + 1)).reshape(2, -1), dtype=torch.float32),
        "tensor_1d": lib.Tensor(array=torch.arange(5 + i, dtype=torch.int16)),
        "tensor_raw": lib.Tensor(bytes=np.arange(4 + i, dtype="<i4").tobytes(), dtype=torch.int32),
        "audio": lib.Audio(array=_tone(i), sampling_rate=8000),
    }


def heavy_sample(i: int, lib: Any) -> dict[str, Any]:
    volume = np.arange(24, dtype=np.int16).reshape(2, 3, 4) + i
    return {
        "nifti": lib.Nifti(array=volume, affine=np.diag([2.0, 2.0, 2.0, 1.0])),
        "mesh": lib.Mesh(mesh=trimesh.creation.box(extents=(1.0 + i, 2.0, 3.0))),
        "pdf": lib.Pdf(path=PDF_FILE),
        "graph": lib.Graph(
            x=torch.arange(6, dtype=torch.float32).reshape(3, 2) + i,
            edge_index=torch.tensor([[0, 1], [1, 2]]),
            y=torch.tensor([i]),
        ),
        "video": lib.Video(bytes=_video_bytes(i)),
        "tiff": lib.Tiff(array=np.arange(20, dtype=np.uint16).reshape(4, 5) * (i + 1)),
    }


def _litdata_core(i: int) -> dict[str, Any]:
    return core_sample(i, litdata)


def _litdata_heavy(i: int) -> dict[str, Any]:
    return heavy_sample(i, litdata)


def _litstream_core(i: int) -> dict[str, Any]:
    return core_sample(i, litstream)


def _litstream_heavy(i: int) -> dict[str, Any]:
    return heavy_sample(i, litstream)


# -- readers ------------------------------------------------------------------------------------------


def _pillow_chw(data: bytes) -> torch.Tensor:
    rgb = np.array(PILImage.open(io.BytesIO(bytes(data))).convert("RGB"), dtype=np.uint8)
    return torch.from_numpy(np.ascontiguousarray(rgb.transpose(2, 0, 1)))


class _PillowJPEG(lds.JPEGSerializer):  # type: ignore[misc]  # LitData is untyped
    def deserialize(self, data: bytes) -> torch.Tensor:
        return _pillow_chw(data)


class _PillowImage(lds.ImageSerializer):  # type: ignore[misc]
    def deserialize(self, data: bytes) -> torch.Tensor:
        return _pillow_chw(data)


class _PillowJPEGArray(lds.JPEGArraySerializer):  # type: ignore[misc]
    def __init__(self) -> None:
        self._jpeg_serializer = _PillowJPEG()


def _litdata_serializers() -> dict[str, Any]:
    return {
        "jpeg": _PillowJPEG(),
        "image": _PillowImage(),
        "jpeg_array": _PillowJPEGArray(),
        "audio": lds.AudioSerializer(decode="bytes"),
        "video": lds.VideoSerializer(decode="bytes"),
    }


def litdata_read(directory: Path) -> list[dict[str, Any]]:
    copy = directory.parent / f"{directory.name}-litdata-read"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(directory, copy)
    ds = litdata.StreamingDataset(str(copy), serializers=_litdata_serializers())
    samples = [ds[i] for i in range(len(ds))]
    del ds
    gc.collect()
    return samples


def litstream_read(directory: Path) -> list[dict[str, Any]]:
    ds = litstream.StreamingDataset(directory, shuffle=False, serializers={"video": LsVideo(decode="bytes")})
    return [ds[i] for i in range(len(ds))]


def _data_format(directory: Path) -> list[str]:
    result: list[str] = json.loads((directory / "index.json").read_text())["config"]["data_format"]
    return result


@pytest.fixture(scope="module")
def datasets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("media")
    out = {
        "litdata_core": root / "litdata_core",
        "litdata_heavy": root / "litdata_heavy",
        "litstream_core": root / "litstream_core",
        "litstream_heavy": root / "litstream_heavy",
    }
    for name, fn in (("litdata_core", _litdata_core), ("litdata_heavy", _litdata_heavy)):
        litdata_optimize(fn=fn, inputs=list(range(NUM)), output_dir=str(out[name]), chunk_bytes="64MB",
                         num_workers=1, verbose=False)  # fmt: skip
    litstream.optimize(_litstream_core, list(range(NUM)), out["litstream_core"], chunk_bytes="64MB", num_workers=1)
    litstream.optimize(_litstream_heavy, list(range(NUM)), out["litstream_heavy"], chunk_bytes="64MB", num_workers=1)
    return out


# -- comparisons --------------------------------------------------------------------------------------


def _decode_audio(data: bytes | memoryview) -> tuple[np.ndarray, int]:
    frames, rate = sf.read(io.BytesIO(bytes(data)), dtype="float32", always_2d=True)
    return frames.T, rate


def _mesh_vertices(mesh: Any) -> np.ndarray:
    geometry = mesh.to_geometry() if hasattr(mesh, "to_geometry") else mesh.dump(concatenate=True)
    return np.asarray(sorted(map(tuple, np.round(geometry.vertices, 6))))


def assert_core_same(ours: dict[str, Any], theirs: dict[str, Any], i: int) -> None:
    text = Path(TEXT_FILE).read_text(encoding="utf-8")
    assert ours["caption"] == theirs["caption"] == f"caption {i}: caf\u00e9"
    assert ours["text_file"] == theirs["text_file"] == text
    assert ours["file"] == bytes(theirs["file"]) == Path(TEXT_FILE).read_bytes()
    assert torch.equal(ours["png"], theirs["png"])
    assert torch.equal(ours["png"], torch.from_numpy(_pixels(i).transpose(2, 0, 1).copy()))  # PNG is lossless
    for key in ("image_q", "jpeg"):
        assert ours[key].dtype == torch.uint8
        assert tuple(ours[key].shape) == (3, 12, 20)
        assert torch.equal(ours[key], theirs[key]), key
    assert len(ours["jpeg_array"]) == len(theirs["jpeg_array"]) == 2
    for a, b in zip(ours["jpeg_array"], theirs["jpeg_array"], strict=True):
        assert torch.equal(a, b)
    assert ours["pil"].mode == theirs["pil"].mode == "L"
    assert ours["pil"].tobytes() == theirs["pil"].tobytes()
    assert np.array_equal(np.asarray(ours["pil"]), np.asarray(PILImage.fromarray(_pixels(i)).convert("L")))
    for key, expected in (
        ("tensor_2d", torch.arange(6 * (i + 1), dtype=torch.float32).reshape(2, -1)),
        ("tensor_1d", torch.arange(5 + i, dtype=torch.int16)),
        ("tensor_raw", torch.arange(4 + i, dtype=torch.int32)),
    ):
        assert ours[key].dtype == theirs[key].dtype == expected.dtype, key
        assert torch.equal(ours[key], expected), key
        assert torch.equal(theirs[key], expected), key
    samples, rate = _decode_audio(theirs["audio"])
    assert ours["audio"]["sampling_rate"] == rate == 8000
    assert np.array_equal(ours["audio"]["array"], samples[0])
    assert np.abs(samples[0] - _tone(i)).max() < 2 / 32767


def assert_heavy_same(ours: dict[str, Any], theirs: dict[str, Any], i: int) -> None:
    volume = np.arange(24, dtype=np.int16).reshape(2, 3, 4) + i
    for image in (ours["nifti"], theirs["nifti"]):
        assert isinstance(image, nib.Nifti1Image)
        assert np.array_equal(np.asarray(image.dataobj), volume)
        assert np.allclose(image.affine, np.diag([2.0, 2.0, 2.0, 1.0]))
    assert np.allclose(_mesh_vertices(ours["mesh"]), _mesh_vertices(theirs["mesh"]))
    assert np.allclose(np.ptp(_mesh_vertices(ours["mesh"]), axis=0), [1.0 + i, 2.0, 3.0])
    with pdfplumber.open(PDF_FILE) as expected:
        for pdf in (ours["pdf"], theirs["pdf"]):
            assert [p.bbox for p in pdf.pages] == [p.bbox for p in expected.pages]
            assert len(pdf.pages[0].curves) == len(expected.pages[0].curves)
            pdf.close()
    for graph in (ours["graph"], theirs["graph"]):
        assert type(graph).__name__ == "Graph"
        assert torch.equal(graph.x, torch.arange(6, dtype=torch.float32).reshape(3, 2) + i)
        assert torch.equal(graph.edge_index, torch.tensor([[0, 1], [1, 2]]))
        assert torch.equal(graph.y, torch.tensor([i]))
    assert bytes(ours["video"]) == bytes(theirs["video"]) == _video_bytes(i)
    assert np.array_equal(ours["tiff"], np.arange(20, dtype=np.uint16).reshape(4, 5) * (i + 1))


# -- tests --------------------------------------------------------------------------------------------


def test_both_record_the_same_data_formats(datasets: dict[str, Path]) -> None:
    assert _data_format(datasets["litstream_core"]) == _data_format(datasets["litdata_core"]) == [
        "text", "text", "file:py", "image:png", "image:jpg", "jpeg", "jpeg_array", "pil",
        "tensor", "no_header_tensor:14", "no_header_tensor:16", "audio:wav",
    ]  # fmt: skip
    # LitData records Tiff wrappers as "tiff", which its own reader cannot resolve; litstream writes "tifffile".
    assert _data_format(datasets["litdata_heavy"]) == ["nifti:nii", "mesh:glb", "pdf", "graph", "video:mp4", "tiff"]
    assert _data_format(datasets["litstream_heavy"]) == [*_data_format(datasets["litdata_heavy"])[:-1], "tifffile"]


def test_core_chunks_are_byte_identical(datasets: dict[str, Path]) -> None:
    def chunks(directory: Path) -> list[bytes]:
        return [p.read_bytes() for p in sorted(directory.glob("*.bin"))]

    assert chunks(datasets["litstream_core"]) == chunks(datasets["litdata_core"])


@pytest.mark.parametrize("kind", ["core", "heavy"])
def test_litstream_reads_litdata_media(datasets: dict[str, Path], kind: str) -> None:
    directory = datasets[f"litdata_{kind}"]
    ours = litstream_read(directory)
    if kind == "core":
        theirs = litdata_read(directory)
        for i in range(NUM):
            assert_core_same(ours[i], theirs[i], i)
    else:  # LitData cannot read its own "tiff" leaf: compare with litstream's own dataset instead
        theirs = litdata_read(datasets["litstream_heavy"])
        for i in range(NUM):
            assert_heavy_same(ours[i], theirs[i], i)


@pytest.mark.parametrize("kind", ["core", "heavy"])
def test_litdata_reads_litstream_media(datasets: dict[str, Path], kind: str) -> None:
    directory = datasets[f"litstream_{kind}"]
    theirs = litdata_read(directory)
    ours = litstream_read(directory)
    check = assert_core_same if kind == "core" else assert_heavy_same
    for i in range(NUM):
        check(ours[i], theirs[i], i)


def test_litstream_decodes_audio_samples_and_video_frames(datasets: dict[str, Path]) -> None:
    """The non-default decode modes of litstream's audio and video encodings, on LitData's files."""
    ds = litstream.StreamingDataset(
        datasets["litdata_core"], shuffle=False, serializers={"audio": LsAudio(decode="samples")}
    )
    samples, rate = ds[1]["audio"]
    assert rate == 8000
    assert samples.dtype == torch.float32
    assert tuple(samples.shape) == (1, 800)
    assert torch.allclose(samples[0], torch.from_numpy(_tone(1)), atol=2 / 32767)
    heavy = litstream.StreamingDataset(
        datasets["litdata_heavy"], shuffle=False, serializers={"video": LsVideo(decode="all")}
    )
    frames, audio, meta = heavy[2]["video"]
    assert frames.dtype == torch.uint8
    assert tuple(frames.shape) == (4, 24, 32, 3)
    assert meta["num_frames"] == 4
    assert meta["fps"] == 5.0
    assert tuple(audio.shape) == (1, 0)
    means = [float(frames[k].float().mean()) for k in range(4)]
    assert np.allclose(means, [20, 60, 100, 140], atol=2.5)  # flat frames through lossy YUV 4:2:0


# -- bare values: path strings and lists of JPEGs, claimed as LitData claims them -----------------------

_BARE: dict[str, str] = {}


def _bare_sample(item: tuple[int, dict[str, str]]) -> dict[str, Any]:
    i, paths = item  # the paths travel with the input: LitData's optimize runs in a fresh process
    frames = [PILImage.open(paths["jpg"]), PILImage.open(paths["jpg"])]
    for frame in frames:
        frame.load()
    return {
        "frames": frames,  # one jpeg_array leaf, not a list node
        "png": paths["png"],
        "wav": paths["wav"],
        "notes": paths["txt"],  # a string in litstream, a pickled string in LitData: "notes" either way
        "caption": f"sample {i}: see photo.jpg",
    }


@pytest.fixture(scope="module")
def bare_datasets(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bare")
    PILImage.fromarray(_pixels(0)).save(root / "p.png")
    PILImage.fromarray(_pixels(1)).save(root / "p.jpg", quality=90)
    sf.write(str(root / "t.wav"), _tone(0), 8000, subtype="PCM_16")
    (root / "n.txt").write_text("notes")
    _BARE.update(png=str(root / "p.png"), jpg=str(root / "p.jpg"), wav=str(root / "t.wav"), txt=str(root / "n.txt"))
    out = {"litdata": root / "litdata", "litstream": root / "litstream"}
    inputs = [(i, dict(_BARE)) for i in range(NUM)]
    litdata_optimize(fn=_bare_sample, inputs=inputs, output_dir=str(out["litdata"]), chunk_bytes="64MB",
                     num_workers=1, verbose=False)  # fmt: skip
    litstream.optimize(_bare_sample, inputs, out["litstream"], chunk_bytes="64MB", num_workers=1,
                       verbose=False)  # fmt: skip
    return out


def test_bare_values_are_claimed_as_in_litdata(bare_datasets: dict[str, Path]) -> None:
    def config(directory: Path) -> dict[str, Any]:
        result: dict[str, Any] = json.loads((directory / "index.json").read_text())["config"]
        return result

    ours, theirs = config(bare_datasets["litstream"]), config(bare_datasets["litdata"])
    assert ours["data_spec"] == theirs["data_spec"]
    assert theirs["data_format"] == ["jpeg_array", "image:png", "audio:wav", "pickle", "str"]
    assert ours["data_format"] == ["jpeg_array", "image:png", "audio:wav", "str", "str"]
    for directory in bare_datasets.values():
        for read in (litstream_read(directory), litdata_read(directory)):
            for i, sample in enumerate(read):
                assert [tuple(f.shape) for f in sample["frames"]] == [(3, 12, 20)] * 2
                assert torch.equal(sample["frames"][0], _pillow_chw(Path(_BARE["jpg"]).read_bytes()))
                assert torch.equal(sample["png"], torch.from_numpy(_pixels(0).transpose(2, 0, 1).copy()))
                wav = sample["wav"] if isinstance(sample["wav"], (bytes, memoryview)) else None
                samples = _decode_audio(wav)[0][0] if wav is not None else sample["wav"]["array"]
                assert np.abs(samples - _tone(0)).max() < 2 / 32767
                assert sample["notes"] == _BARE["txt"]
                assert sample["caption"] == f"sample {i}: see photo.jpg"
