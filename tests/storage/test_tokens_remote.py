"""A TokensLoader dataset on S3 (the real SeaweedFS server): written there by optimize, streamed through
the local chunk cache, ``ds[i]`` as one range read per window, and ``astream`` straight from the store."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest
import torch
from storage_backends import unique

from litstream import StreamingDataset, TokensLoader, astream, optimize

if TYPE_CHECKING:
    from pathlib import Path

    from servers import S3Server

LENGTHS = [7 + (3 * i) % 11 for i in range(30)]
BASE = [sum(LENGTHS[:i]) for i in range(30)]
BLOCK = 6


def tokens(i: int) -> torch.Tensor:
    return torch.arange(BASE[i], BASE[i] + LENGTHS[i], dtype=torch.int64)


@pytest.mark.slow
@pytest.mark.parametrize("compression", [None, "zstd"])
def test_token_dataset_on_s3(s3_server: S3Server, tmp_path: Path, compression: str | None) -> None:
    url, options = f"s3://{s3_server.bucket}/{unique()}", s3_server.options()
    optimize(
        tokens,
        range(30),
        url,
        chunk_size=40,
        compression=compression,
        item_loader=TokensLoader(),
        num_workers=1,
        verbose=False,
        storage_options=options,
    )
    local = tmp_path / "local"
    optimize(tokens, range(30), local, chunk_size=40, item_loader=TokensLoader(), num_workers=1, verbose=False)
    expected = [w.tolist() for w in StreamingDataset(local, item_loader=TokensLoader(BLOCK))]
    assert len(expected) > 20

    ds = StreamingDataset(url, item_loader=TokensLoader(BLOCK), storage_options=options, cache_dir=tmp_path / "cache")
    assert len(ds) == len(expected)
    assert [w.tolist() for w in ds] == expected
    assert sorted(p.name for p in (tmp_path / "cache").rglob("chunk-*.bin"))  # chunks went through the cache

    fresh = StreamingDataset(url, item_loader=TokensLoader(BLOCK), storage_options=options, cache_dir=tmp_path / "c2")
    picks = [0, 5, len(expected) - 1]
    assert [fresh[i].tolist() for i in picks] == [expected[i] for i in picks]

    async def collect() -> list[list[int]]:
        async with astream(url, item_loader=TokensLoader(BLOCK), storage_options=options) as windows:
            return [w.tolist() async for w in windows]

    assert anyio.run(collect) == expected
    assert anyio.run(collect, backend="trio") == expected
