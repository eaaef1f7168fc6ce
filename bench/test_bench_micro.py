"""Micro-benchmarks of litstream's pure building blocks (pytest-benchmark; not part of the test suite).

Serializer encode/decode of the e2e sample, chunk pack/unpack, the column-wise batch decode against
item-by-item decode, and the read plan. Where LitData has the same building block (its serializers,
its ``PyTreeLoader`` item encoding, its ``FullShuffle`` plan), the pair sits in one group.

    .venv/bin/python -m pytest bench/test_bench_micro.py --benchmark-only
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from _e2e_data import make_sample

from litstream.format._chunk import ChunkView, pack_chunk
from litstream.format._index import DatasetConfig
from litstream.format._loaders import SampleDecoder, SampleEncoder
from litstream.read.plan._plan import worker_plan

if TYPE_CHECKING:
    from pathlib import Path

    from pytest_benchmark.fixture import BenchmarkFixture

ITEMS = 2_000
SAMPLES = [make_sample(i) for i in range(ITEMS)]


def _encoded() -> tuple[list[bytes], SampleDecoder]:
    encoder = SampleEncoder()
    items = [encoder.encode(s) for s in SAMPLES]
    config = DatasetConfig(data_format=tuple(encoder.data_format), data_spec=encoder.data_spec)
    return items, SampleDecoder(config)


ENCODED, DECODER = _encoded()
CHUNK = pack_chunk(ENCODED)


@pytest.mark.benchmark(group="serializer: encode 2,000 samples")
def test_encode_litstream(benchmark: BenchmarkFixture) -> None:
    def run() -> list[bytes]:
        encoder = SampleEncoder()
        return [encoder.encode(s) for s in SAMPLES]

    assert benchmark(run) == ENCODED


@pytest.mark.benchmark(group="serializer: encode 2,000 samples")
def test_encode_litdata(benchmark: BenchmarkFixture, tmp_path: Path) -> None:
    from litdata.streaming.writer import BinaryWriter

    def run() -> list[bytes]:
        writer = BinaryWriter(str(tmp_path), chunk_bytes="64MB")
        return [writer.serialize(s)[0] for s in SAMPLES]

    assert benchmark(run) == ENCODED  # byte-identical items


@pytest.mark.benchmark(group="serializer: decode 2,000 items one by one")
def test_decode_each(benchmark: BenchmarkFixture) -> None:
    out = benchmark(lambda: [DECODER.decode(item) for item in ENCODED])
    assert [s["label"] for s in out] == [s["label"] for s in SAMPLES]


@pytest.mark.benchmark(group="serializer: decode 2,000 items one by one")
def test_decode_batch(benchmark: BenchmarkFixture) -> None:
    view = ChunkView(CHUNK)
    begins, ends = view.spans(range(ITEMS))
    out = benchmark(lambda: DECODER.decode_many(CHUNK, begins, ends))
    assert [s["name"] for s in out] == [s["name"] for s in SAMPLES]
    assert np.array_equal(out[-1]["image"], SAMPLES[-1]["image"])


@pytest.mark.benchmark(group="chunk: pack 2,000 items")
def test_pack_chunk(benchmark: BenchmarkFixture) -> None:
    assert benchmark(pack_chunk, ENCODED) == CHUNK


@pytest.mark.benchmark(group="chunk: unpack 2,000 items")
def test_unpack_items(benchmark: BenchmarkFixture) -> None:
    def run() -> list[Any]:
        view = ChunkView(CHUNK)
        return [view.item(i) for i in range(ITEMS)]

    out = benchmark(run)
    assert bytes(out[7]) == ENCODED[7]


@pytest.mark.benchmark(group="chunk: unpack 2,000 items")
def test_unpack_spans(benchmark: BenchmarkFixture) -> None:
    out = benchmark(lambda: ChunkView(CHUNK).spans(range(ITEMS)))
    assert CHUNK[int(out[0][7]) : int(out[1][7])] == ENCODED[7]


REGIONS = [(0, 5_000)] * 200  # 1,000,000 items in 200 chunks


@pytest.mark.benchmark(group="plan: 1M items, 200 chunks, 8 ranks x 4 workers, shuffled")
def test_plan_litstream(benchmark: BenchmarkFixture) -> None:
    def run() -> int:
        total = 0
        for rank in range(8):
            for worker in range(4):
                plan = worker_plan(REGIONS, rank=rank, world_size=8, worker=worker, num_workers=4, batch_size=64,
                                   drop_last=True, shuffle=True, seed=42, epoch=1)  # fmt: skip
                total += sum(p.end - p.start for p in plan)
        return total

    assert benchmark(run) > 0
