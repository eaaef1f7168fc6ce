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

``Video(array=...)`` is not written (LitData needs torchvision or torchcodec for it); pass a file.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._errors import FormatError
from ._media_base import MediaRef, has_media_extension, read_media_bytes, require, same_head
from ._serializer_base import Serializer

__all__ = ["Video", "VideoSerializer"]

VIDEO_EXTENSIONS = ("mp4", "ogv", "mjpeg", "avi", "mov", "h264", "mpg", "mpeg", "webm", "wmv", "mkv")


@dataclass
class Video(MediaRef):
    """A video sample (LitData's ``litdata.types.Video``).

    Args:
        path / bytes: A video file, stored as is.
        array: Frames; not supported for writing here (:class:`~litstream.FormatError`).
        fps, stream_index, dimension_order, num_ffmpeg_threads, seek_mode, device: Kept for LitData
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
            raise FormatError("Video(array=...) cannot be encoded here; write the clip to a file and pass path=")
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
