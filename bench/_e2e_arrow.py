"""The data of the Arrow benchmark: dict samples of scalars (a text-classification shape), which LitData
0.2.76 stores as Arrow chunks by default.

Sample ``i`` is ``{"id": i, "text": <40-240 characters>, "label": i % 10, "score": float, "flag": bool}``.
``write`` runs one library's ``optimize`` in this process: LitData's default (Arrow chunks), litstream's
default (Arrow chunks for these rows, as LitData) or litstream with ``chunk_format="pytree"`` or ``"arrow"``;
``chunk_bytes="16MB"`` for all.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

CHUNK_BYTES = "16MB"
_WORDS = ("stream", "chunk", "arrow", "tensor", "shard", "cloud", "batch", "epoch", "token", "cache")


def row(i: int) -> dict[str, Any]:
    words = 6 + (i * 7919) % 30
    text = " ".join(_WORDS[(i + k * 3) % len(_WORDS)] for k in range(words))
    return {"id": i, "text": text, "label": i % 10, "score": ((i * 37) % 1000) / 1000, "flag": i % 3 == 0}


def write(layout: str, output_dir: str, rows: int) -> None:
    """``layout``: ``"litdata"`` (LitData's default), ``"litstream"`` (its default), ``"litstream-pytree"`` or
    ``"litstream-arrow"``."""
    if layout == "litdata":
        import litdata

        litdata.optimize(
            fn=row, inputs=list(range(rows)), output_dir=output_dir, chunk_bytes=CHUNK_BYTES, num_workers=1,
            start_method="fork", verbose=False,
        )  # fmt: skip
        return
    import litstream

    forced = {"litstream-arrow": "arrow", "litstream-pytree": "pytree"}
    extra = {"chunk_format": forced[layout]} if layout in forced else {}
    litstream.optimize(
        row, list(range(rows)), output_dir, chunk_bytes=CHUNK_BYTES, num_workers=1, verbose=False, **extra
    )


@dataclass
class RowChecksum:
    """Order-independent digest of the rows a pass read (comparable across libraries and layouts)."""

    count: int = 0
    ids: int = 0
    labels: int = 0
    texts: int = 0
    scores: float = 0.0
    flags: int = 0

    def add(self, sample: dict[str, Any]) -> None:
        self.count += 1
        self.ids += int(sample["id"])
        self.labels += int(sample["label"])
        self.texts += zlib.crc32(sample["text"].encode()) * (1 + int(sample["id"]) % 7)
        self.scores += float(sample["score"])
        self.flags += bool(sample["flag"])

    def hexdigest(self) -> str:
        return f"{self.count}-{self.ids}-{self.labels}-{self.texts}-{round(self.scores, 3)}-{self.flags}"
