"""``Video(array=...)`` against LitData 0.2.76, both ways, as far as LitData's video codecs run here.

LitData encodes an array with torchvision's ``write_video`` or torchcodec's ``VideoEncoder`` and decodes
with torchcodec (or torchvision's ``read_video``). Under the pinned torch 2.13 neither runs: torchvision
0.28 (torch 2.13's) has no ``read_video``/``write_video`` outside Meta's internal build, and the PyPI
torchcodec wheels need CUDA libraries (``libnvrtc``) and a system FFmpeg. So here LitData refuses
``Video(array=...)`` and cannot decode frames: these tests assert those bounds, compare the payload bytes
both libraries read, and decode them with PyAV; where LitData's codecs do run, the other branches compare
LitData's frames with litstream's. Frames are synthetic ramps (``tests/format/test_media_video_array.py``).
"""

from __future__ import annotations

import gc
import json
import shutil
from typing import TYPE_CHECKING, Any

import pytest

import litstream
from litstream.format.media._video import VideoSerializer
from peer import require_dev, require_peer
from video_frames import assert_close, assert_same_encoding, frames

if TYPE_CHECKING:
    from pathlib import Path

litdata = require_peer("litdata")
av = require_dev("av")
from litdata.streaming import serializers as lds  # noqa: E402

pytestmark = pytest.mark.litdata


def _litdata_decodes_frames() -> bool:
    return bool(lds._torchcodec_usable() or lds._torchvision_read_video_available())


def _litdata_encodes_arrays() -> bool:
    try:
        from torchvision.io import write_video  # noqa: F401
    except Exception:  # torchvision missing, or without its video writer (0.28)
        return bool(lds._torchcodec_usable())
    return True


def _clip(i: int) -> dict[str, Any]:
    return {"clip": litstream.Video(array=frames(i), fps=10), "i": i}


def _litdata_clip(i: int) -> dict[str, Any]:
    return {"clip": litdata.Video(array=frames(i), fps=10), "i": i}


def test_litdata_reads_litstreams_encoded_frames(tmp_path: Path) -> None:
    ours = tmp_path / "ls"
    litstream.optimize(_clip, list(range(3)), ours, chunk_size=2, num_workers=1, verbose=False)
    copy = tmp_path / "ls-litdata-read"
    shutil.copytree(ours, copy)
    theirs = litdata.StreamingDataset(str(copy), serializers={"video": lds.VideoSerializer(decode="bytes")})
    mine = litstream.StreamingDataset(ours, serializers={"video": VideoSerializer(decode="bytes")})
    decoder = VideoSerializer(decode="all")
    for i in range(3):
        payload = theirs[i]["clip"]
        assert bytes(payload) == mine[i]["clip"]
        assert theirs[i]["i"] == i
        video, _, meta = decoder.deserialize(payload)
        assert meta["num_frames"] == 6
        assert meta["fps"] == 10.0
        assert_close(video, frames(i))
    if not _litdata_decodes_frames():  # the bound named in the module docstring
        with pytest.raises(ModuleNotFoundError, match="torchcodec"):
            lds.VideoSerializer(decode="all").deserialize(bytes(mine[0]["clip"]))
    else:
        frames_0 = lds.VideoSerializer(decode="all").deserialize(bytes(mine[0]["clip"]))[0]
        assert_close(frames_0.permute(0, 2, 3, 1) if frames_0.shape[1] == 3 else frames_0, frames(0))
    del theirs
    gc.collect()


def test_litdata_writes_frames_only_where_its_encoder_runs(tmp_path: Path) -> None:
    if not _litdata_encodes_arrays():  # here: no torchvision writer, no loadable torchcodec
        with pytest.raises(TypeError, match=r"requires torchvision\.io\.write_video or torchcodec"):
            lds.VideoSerializer().serialize(litdata.Video(array=frames(0), fps=10))
        return
    assert lds.VideoSerializer().serialize(litdata.Video(array=frames(0), fps=10))[1] == "video:mp4"
    theirs = tmp_path / "ld"
    litdata.optimize(_litdata_clip, list(range(2)), str(theirs), chunk_size=2, num_workers=1)
    assert "video:mp4" in json.loads((theirs / "index.json").read_text())["config"]["data_format"]
    ds = litstream.StreamingDataset(theirs, serializers={"video": VideoSerializer(decode="all")})
    for i in range(2):
        video, _, meta = ds[i]["clip"]
        assert meta["num_frames"] == 6
        assert_close(video, frames(i))


def test_litdatas_wrapper_given_to_litstream_is_encoded_the_same(tmp_path: Path) -> None:
    litstream.optimize(_litdata_clip, list(range(2)), tmp_path / "a", chunk_size=2, num_workers=1, verbose=False)
    litstream.optimize(_clip, list(range(2)), tmp_path / "b", chunk_size=2, num_workers=1, verbose=False)
    raw = [
        litstream.StreamingDataset(tmp_path / d, serializers={"video": VideoSerializer(decode="bytes")}) for d in "ab"
    ]
    for i in range(2):
        assert_same_encoding(raw[0][i]["clip"], raw[1][i]["clip"])
    ds = litstream.StreamingDataset(tmp_path / "a", serializers={"video": VideoSerializer(decode="all")})
    video, _, meta = ds[1]["clip"]
    assert meta["num_frames"] == 6
    assert_close(video, frames(1))
