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
