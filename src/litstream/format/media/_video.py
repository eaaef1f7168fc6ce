"""The ``Video`` wrapper and the ``video`` encoding.

Payload: the video file's bytes; ``data_format`` is ``"video:<ext>"`` (``mp4`` when unknown), as in
LitData 0.2.76. Decoding (``VideoSerializer(decode=...)``, LitData's argument):

* ``"decoder"`` (default): a torchcodec ``VideoDecoder`` over the bytes (LitData's default), which
  needs the ``video`` extra (``torchcodec`` and FFmpeg).
* ``"all"``: ``(frames, audio, metadata)``: frames a ``torch.uint8`` tensor ``(N, H, W, 3)`` decoded
  with PyAV (the ``video`` extra's ``av``), audio a float32 tensor ``(channels, samples)`` (``(1, 0)``
  when the file has none) and metadata ``{"fps", "num_frames", "width", "height"}``. LitData builds
  the same tuple with torchcodec; its metadata dict has torchcodec's keys.
* ``"bytes"``: the stored bytes.

``Video(array=...)`` is encoded as LitData 0.2.76 encodes it with torchvision's ``write_video``: frames
``(N, H, W, C)`` (or ``(N, C, H, W)`` with ``C`` in 1 or 3, moved to the end), cast to uint8, H.264
(``libx264``, ``yuv420p``) in MP4 at ``round(fps)`` frames per second, ``data_format`` ``"video:mp4"``;
here with PyAV (the ``video`` extra), since torchvision 0.28 (the one matched to torch 2.13) ships no
video writer. The stored bytes are an ordinary MP4 (not bit-identical to torchvision's: encoder
versions differ); H.264 is lossy, so decoded frames are close to the array, not equal.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._core._errors import FormatError
from .._serializer_base import Serializer
from ._base import MediaRef, has_media_extension, read_media_bytes, require, same_head
from ._image_codec import _as_numpy

__all__ = ["Video", "VideoSerializer", "encode_video_array"]

VIDEO_EXTENSIONS = ("mp4", "ogv", "mjpeg", "avi", "mov", "h264", "mpg", "mpeg", "webm", "wmv", "mkv")


@dataclass
class Video(MediaRef):
    """A video sample (LitData's ``litdata.types.Video``).

    Args:
        path / bytes: A video file, stored as is.
        array: Frames ``(N, H, W, C)`` or ``(N, C, H, W)``, written as an H.264 MP4 (:func:`encode_video_array`).
        fps: Frames per second of ``array``'s clip (default 25.0, rounded to an integer); not stored otherwise.
        stream_index, dimension_order, num_ffmpeg_threads, seek_mode, device: Kept for LitData
            compatibility (torchcodec decoding options); not stored.
    """

    array: Any = None
    fps: float = 25.0
    stream_index: int | None = None
    dimension_order: str = "NCHW"
    num_ffmpeg_threads: int = 1
    seek_mode: str = "approximate"
    device: str = "cpu"


def _decode_all(data: bytes) -> tuple[Any, Any, dict[str, Any]]:
    import torch

    av = require("av", "video", "VideoSerializer(decode='all')")
    try:
        with av.open(io.BytesIO(data)) as container:
            stream = container.streams.video[0]
            frames = [frame.to_ndarray(format="rgb24") for frame in container.decode(stream)]
            fps = float(stream.average_rate) if stream.average_rate else 0.0
        with av.open(io.BytesIO(data)) as container:
            audio_frames = [f.to_ndarray() for f in container.decode(audio=0)] if container.streams.audio else []
    except (av.FFmpegError, IndexError, ValueError) as exc:
        raise FormatError(f"invalid video payload ({len(data)} bytes): {exc}") from exc
    if not frames:
        raise FormatError("video payload has no frames")
    video = torch.from_numpy(np.stack(frames))
    audio = torch.from_numpy(np.concatenate(audio_frames, axis=1).astype(np.float32)) if audio_frames else None
    meta = {"fps": fps, "num_frames": len(frames), "width": int(video.shape[2]), "height": int(video.shape[1])}
    return video, audio if audio is not None else torch.zeros(1, 0), meta


def encode_video_array(array: Any, fps: float) -> bytes:
    """An MP4 (H.264, yuv420p) of ``array``'s frames at ``round(fps)`` frames per second (module docstring).

    Args:
        array: ``(N, H, W, C)`` or ``(N, C, H, W)`` frames (NumPy array, torch tensor or nested
            sequence), ``C`` 3 (RGB) or 1 (grey, repeated to RGB); cast to uint8 as LitData casts
            (``torch.Tensor.to(torch.uint8)``: no scaling).
        fps: Frames per second (LitData's ``Video.fps``, default 25.0); rounded, as torchvision rounds it.

    Raises:
        FormatError: not 4-D, no frames, a channel count other than 1 or 3, an odd height or width
            (yuv420p halves both), or ``fps`` that rounds below 1.
        ModuleNotFoundError: PyAV is missing (``pip install "litstream[video]"``).
    """
    frames = _as_numpy(array)
    if frames.ndim != 4:
        raise FormatError(f"Video(array=...) must be (N, H, W, C) or (N, C, H, W), got shape {frames.shape}")
    if frames.shape[1] in {1, 3} and frames.shape[-1] not in {1, 3}:  # LitData's rule for (N, C, H, W)
        frames = frames.transpose(0, 2, 3, 1)
    count, height, width, channels = frames.shape
    if count == 0 or channels not in {1, 3}:
        raise FormatError(f"Video(array=...) needs at least one frame with 1 or 3 channels, got shape {frames.shape}")
    if height % 2 or width % 2:
        raise FormatError(
            f"Video(array=...) frames are {height} x {width}; H.264 in yuv420p needs an even height and width "
            "(crop or pad by one pixel)"
        )
    rate = round(float(fps))
    if rate < 1:
        raise FormatError(f"Video(fps={fps!r}) must round to at least 1 frame per second")
    frames = np.ascontiguousarray(frames.astype(np.uint8))
    if channels == 1:
        frames = np.repeat(frames, 3, axis=3)
    av = require("av", "video", "Video(array=...)")
    buffer = io.BytesIO()
    with av.open(buffer, mode="w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=rate)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for image in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return buffer.getvalue()


class VideoSerializer(Serializer):
    """``Video`` wrappers and video path strings (``"video:<ext>"``).

    Args:
        decode: ``"decoder"`` (default), ``"all"`` or ``"bytes"`` (module docstring).
        seek_mode, device, num_ffmpeg_threads, dimension_order, stream_index: torchcodec options
            for ``"decoder"``.

    Raises:
        FormatError: ``decode`` or ``seek_mode`` is not a known name.
    """

    name = "video"

    def __init__(
        self,
        decode: str = "decoder",
        seek_mode: str = "approximate",
        device: str = "cpu",
        num_ffmpeg_threads: int = 1,
        dimension_order: str = "NCHW",
        stream_index: int | None = None,
    ) -> None:
        if decode not in {"all", "decoder", "bytes"}:
            raise FormatError(f"VideoSerializer(decode={decode!r}): use 'decoder', 'all' or 'bytes'")
        if seek_mode not in {"exact", "approximate"}:
            raise FormatError(f"VideoSerializer(seek_mode={seek_mode!r}): use 'exact' or 'approximate'")
        self.decode = decode
        self.seek_mode = seek_mode
        self.device = device
        self.num_ffmpeg_threads = num_ffmpeg_threads
        self.dimension_order = dimension_order
        self.stream_index = stream_index

    def can_serialize(self, obj: object) -> bool:
        return isinstance(obj, Video) or has_media_extension(obj, VIDEO_EXTENSIONS)

    def serialize(self, obj: Any) -> tuple[bytes, str | None]:
        if isinstance(obj, Video) and obj.array is not None:
            return encode_video_array(obj.array, obj.fps), "video:mp4"
        data, ext = read_media_bytes(obj)
        return data, f"video:{ext or 'mp4'}"

    def deserialize(self, data: bytes | memoryview) -> Any:
        raw = bytes(data)
        if self.decode == "bytes":
            return raw
        if self.decode == "all":
            return _decode_all(raw)
        decoders = require("torchcodec.decoders", "video", "VideoSerializer(decode='decoder')")
        options: dict[str, Any] = {
            "dimension_order": self.dimension_order,
            "num_ffmpeg_threads": self.num_ffmpeg_threads,
            "device": self.device,
            "seek_mode": self.seek_mode,
        }
        if self.stream_index is not None:
            options["stream_index"] = self.stream_index
        return decoders.VideoDecoder(raw, **options)

    def same_format(self, recorded: str, fixed: str) -> bool:
        return same_head(recorded, fixed)
