"""The end-to-end benchmark's data and its checksum (imported by both libraries' worker processes).

Sample ``i`` is ``{"image": uint8 (3, 64, 64), "label": int, "name": str}``: the image is a fixed random
array plus ``i % 251`` (wrapping), so samples differ and building one is cheap (the optimize benchmark
measures the libraries, not the sample function).

Checksum: order-independent, so two libraries (or two worker interleavings) that read the same samples
agree. It is the tuple (count, sum of labels, sum of every image's bytes read as little-endian uint64
words mod 2**64, sum of crc32(name) and the sum of ``label * crc32(name)``), as a hex string.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

NUM_SAMPLES = 50_000
IMAGE_SHAPE = (3, 64, 64)
CHUNK_BYTES = "64MB"
BATCH_SIZE = 256
OPTIMIZE_WORKERS = 2

_BASE = np.random.default_rng(0).integers(0, 256, size=IMAGE_SHAPE, dtype=np.uint8)
_MASK = 2**64 - 1


def make_sample(i: int) -> dict[str, Any]:
    """Sample ``i`` (see the module docstring)."""
    return {"image": _BASE + np.uint8(i % 251), "label": i % 1000, "name": f"sample-{i:06d}"}


@dataclass
class Checksum:
    """Accumulates what a pass read; :meth:`hexdigest` is comparable across libraries."""

    count: int = 0
    labels: int = 0
    image_words: int = 0
    names: int = 0
    mixed: int = 0

    def add_sample(self, sample: Any) -> None:
        image = np.ascontiguousarray(np.asarray(sample["image"]))
        label = int(sample["label"])
        crc = zlib.crc32(sample["name"].encode())
        self.count += 1
        self.labels += label
        self.image_words = (self.image_words + int(image.view("<u8").sum(dtype=np.uint64))) & _MASK
        self.names += crc
        self.mixed += label * crc

    def add_batch(self, batch: Any) -> None:
        images = np.ascontiguousarray(np.asarray(batch["image"]))
        labels = [int(v) for v in np.asarray(batch["label"]).tolist()]
        names = list(batch["name"])
        crcs = [zlib.crc32(n.encode()) for n in names]
        self.count += len(labels)
        self.labels += sum(labels)
        self.image_words = (self.image_words + int(images.view("<u8").sum(dtype=np.uint64))) & _MASK
        self.names += sum(crcs)
        self.mixed += sum(a * b for a, b in zip(labels, crcs, strict=True))

    def hexdigest(self) -> str:
        return f"{self.count:x}-{self.labels:x}-{self.image_words:016x}-{self.names:x}-{self.mixed:x}"


def expected_checksum(num_samples: int = NUM_SAMPLES) -> str:
    """The checksum of a pass over every sample, computed from :func:`make_sample` directly."""
    check = Checksum()
    for i in range(num_samples):
        check.add_sample(make_sample(i))
    return check.hexdigest()
