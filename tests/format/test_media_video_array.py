"""``Video(array=...)``: frames written as an H.264 MP4 (LitData's encoding) and decoded back with PyAV.

Frames are synthetic (smooth ramps that move from frame to frame); H.264 is lossy, so decoded frames are
compared with a tolerance, and the number of frames, the size and the frame rate exactly.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np

import litstream
from litstream.format.media._video import VideoSerializer, encode_video_array
from peer import require_dev
from video_frames import assert_close, assert_same_encoding, frames

if TYPE_CHECKING:
    from pathlib import Path

av = require_dev("av")
torch = require_dev("torch")


def test_frames_round_trip_through_optimize(tmp_path: Path) -> None:
    def fn(i: int) -> dict[str, Any]:
        return {"clip": litstream.Video(array=frames(i), fps=12), "i": i}

    litstream.optimize(fn, list(range(3)), tmp_path, chunk_size=2, num_workers=1, verbose=False)
    ds = litstream.StreamingDataset(tmp_path, serializers={"video": VideoSerializer(decode="all")})
    index = json.loads((tmp_path / "index.json").read_text())
    assert "video:mp4" in index["config"]["data_format"]
    for i in range(3):
        video, audio, meta = ds[i]["clip"]
        assert meta == {"fps": 12.0, "num_frames": 6, "width": 32, "height": 24}
        assert video.dtype == torch.uint8
        assert tuple(audio.shape) == (1, 0)  # no audio track
        assert_close(video, frames(i))
    raw = litstream.StreamingDataset(tmp_path, serializers={"video": VideoSerializer(decode="bytes")})
    payload = raw[1]["clip"]
    assert payload[4:8] == b"ftyp"
    assert_same_encoding(payload, encode_video_array(frames(1), 12))


def test_channels_first_tensors_grey_frames_and_casts_match_litdatas_rules() -> None:
    clip = frames(0)
    channels_first = torch.from_numpy(clip).permute(0, 3, 1, 2)  # (N, C, H, W), moved as LitData moves it
    assert_same_encoding(encode_video_array(channels_first, 25.0), encode_video_array(clip, 25.0))
    assert_same_encoding(encode_video_array(clip.astype(np.float64) + 0.75, 25.0), encode_video_array(clip, 25.0))
    assert_same_encoding(encode_video_array(clip, 24.6), encode_video_array(clip, 25))  # fps rounded, as torchvision
    grey = clip[..., :1]
    video, _, meta = VideoSerializer(decode="all").deserialize(encode_video_array(grey, 10))
    assert meta["num_frames"] == 6
    assert_close(video, np.repeat(grey, 3, axis=3))
