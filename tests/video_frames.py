"""Synthetic video frames for the ``Video(array=...)`` tests, and the tolerance their H.264 round trip meets."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["assert_close", "frames"]


def frames(i: int, count: int = 6, height: int = 24, width: int = 32) -> np.ndarray:
    """Synthetic: an RGB ramp of ``count`` frames ``(N, H, W, 3)`` uint8 that shifts with the frame and ``i``."""
    t = np.arange(count)[:, None, None, None]
    y = np.arange(height)[None, :, None, None]
    x = np.arange(width)[None, None, :, None]
    c = np.arange(3)[None, None, None, :]
    return (30 + 8 * t + 2 * y + 2 * x + 20 * c + 5 * i).astype(np.uint8)


def assert_close(decoded: Any, expected: np.ndarray) -> None:
    """Same shape; H.264 at its default quality with 4:2:0 chroma: mean error < 3, none above 40."""
    got = np.asarray(decoded, dtype=np.int64)
    assert got.shape == expected.shape
    error = np.abs(got - expected.astype(np.int64))
    assert error.mean() < 3.0, error.mean()
    assert error.max() <= 40, error.max()


def assert_same_encoding(a: bytes, b: bytes) -> None:
    """Two MP4 payloads of the same frames by the same rules: byte-equal where x264 is reproducible, else
    (x264's output can differ by a few bytes between processes and threads on some CPUs) the same
    container metadata and frames that decode within H.264's tolerance of each other."""
    if a == b:
        return
    from litstream.format.media._video import VideoSerializer

    decode = VideoSerializer(decode="all").deserialize
    video_a, audio_a, meta_a = decode(a)
    video_b, audio_b, meta_b = decode(b)
    assert meta_a == meta_b
    assert tuple(audio_a.shape) == tuple(audio_b.shape)
    assert_close(video_a, np.asarray(video_b))
