"""Reported failure B22: a raw ``bytes`` leaf written with ``compression="zstd"`` reads back exactly."""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from litstream import StreamingDataLoader, StreamingDataset, optimize

if TYPE_CHECKING:
    from pathlib import Path

PAYLOAD_BYTES = 16_000


def payload(i: int) -> bytes:
    """Deterministic, incompressible-looking bytes for input ``i`` (``PAYLOAD_BYTES`` long)."""
    out = bytearray()
    counter = 0
    while len(out) < PAYLOAD_BYTES:
        out += hashlib.sha256(f"{i}:{counter}".encode()).digest()
        counter += 1
    return bytes(out[:PAYLOAD_BYTES])


def wav_like(i: int) -> dict[str, Any]:
    return {"content": payload(i)}


def test_b22_bytes_leaf_with_zstd_round_trips(tmp_path: Path) -> None:
    optimize(
        fn=wav_like,
        inputs=list(range(100)),
        output_dir=tmp_path,
        num_workers=4,
        chunk_bytes="64MB",
        compression="zstd",
        verbose=False,
    )
    assert all(p.name.endswith(".zstd.bin") for p in tmp_path.glob("chunk-*"))
    ds = StreamingDataset(tmp_path)
    assert len(ds) == 100
    first = ds[0]
    assert isinstance(first["content"], bytes)
    assert first["content"] == payload(0)
    assert [ds[i]["content"] for i in (17, 99)] == [payload(17), payload(99)]
    streamed = sorted(s["content"] for s in ds)
    assert streamed == sorted(payload(i) for i in range(100))
    loader = StreamingDataLoader(StreamingDataset(tmp_path), batch_size=10, num_workers=2)
    batched = sorted(x for batch in loader for x in batch["content"])
    assert batched == sorted(payload(i) for i in range(100))
