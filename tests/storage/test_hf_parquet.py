"""``StreamingDataset("hf://datasets/org/name/dir")`` on a Parquet repository (the Hub-layout server)."""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from storage_backends import unique

from litstream import (
    ConfigurationError,
    ParquetLoader,
    StreamingDataLoader,
    StreamingDataset,
    TokensLoader,
    index_hf_dataset,
)

if TYPE_CHECKING:
    from pathlib import Path

    from servers import HubServer

ROWS = (6, 4, 5)
TOTAL = sum(ROWS)


def parquet_file(start: int, rows: int) -> bytes:
    sink = io.BytesIO()
    ids = list(range(start, start + rows))
    pq.write_table(pa.table({"id": ids, "text": [f"t{i}" for i in ids]}), sink, row_group_size=3)
    return sink.getvalue()


@pytest.fixture
def repo(hub_server: HubServer) -> str:
    """A Hub dataset with three Parquet files under ``data/``; returns its hf:// URL."""
    name = unique()
    folder = hub_server.dataset_dir(f"org/{name}") / "data"
    folder.mkdir(parents=True)
    start = 0
    for k, n in enumerate(ROWS):
        (folder / f"train-{k:05d}.parquet").write_bytes(parquet_file(start, n))
        start += n
    return f"hf://datasets/org/{name}/data"


def parquet_requests(server: HubServer, since: int) -> list[tuple[str, dict[str, str]]]:
    return [(path, headers) for _, path, headers in server.requests[since:] if path.endswith(".parquet")]


def test_one_liner_indexes_once_and_streams_rows(
    repo: str, hub_server: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_parquet_token")
    options = {"endpoint": hub_server.url}
    cache = tmp_path / "cache"
    start = len(hub_server.requests)
    ds = StreamingDataset(repo, storage_options=options, cache_dir=cache)
    indexing = parquet_requests(hub_server, start)
    assert len(indexing) == 2 * len(ROWS)  # footers only: tail, then footer, per file
    assert {h.get("range", "")[:6] for _, h in indexing} == {"bytes="}
    assert {h.get("authorization") for _, h in indexing} == {"Bearer hf_parquet_token"}
    (kept,) = cache.rglob("hf-index/*/index.json")
    written = kept.stat().st_mtime_ns
    assert len(ds) == TOTAL
    assert [row["id"] for row in ds] == list(range(TOTAL))
    assert ds[7] == {"id": 7, "text": "t7"}

    # The next run and the DataLoader workers reuse the kept index: no footer is read again.
    before = len(hub_server.requests)
    again = StreamingDataset(repo, storage_options=options, cache_dir=cache, shuffle=True)
    ids = [i for batch in StreamingDataLoader(again, batch_size=4, num_workers=2) for i in batch["id"].tolist()]
    assert sorted(ids) == list(range(TOTAL))
    assert len(hub_server.requests) > before  # rows were read from the server
    assert list(cache.rglob("hf-index/*/index.json")) == [kept]
    assert kept.stat().st_mtime_ns == written  # not indexed again


def test_index_hf_dataset_returns_the_kept_index(repo: str, hub_server: HubServer, tmp_path: Path) -> None:
    options: dict[str, Any] = {"endpoint": hub_server.url, "token": False}
    folder = index_hf_dataset(repo, str(tmp_path / "hf"), options)
    assert folder.startswith(str(tmp_path / "hf" / "hf-index"))
    assert index_hf_dataset(repo, str(tmp_path / "hf"), options) == folder
    ds = StreamingDataset(repo, storage_options=options, index_path=folder, item_loader=ParquetLoader(columns=["id"]))
    assert [row["id"] for row in ds] == list(range(TOTAL))


def test_a_non_parquet_loader_is_refused(repo: str, hub_server: HubServer, tmp_path: Path) -> None:
    options: dict[str, Any] = {"endpoint": hub_server.url, "token": False}
    with pytest.raises(ConfigurationError, match="ParquetLoader"):
        StreamingDataset(repo, storage_options=options, cache_dir=tmp_path, item_loader=TokensLoader(block_size=4))
    with pytest.raises(ConfigurationError, match="hf://"):
        index_hf_dataset("s3://bucket/data")


def test_optimize_hf_converts_every_row(repo: str, hub_server: HubServer, tmp_path: Path) -> None:
    from litstream import optimize_hf

    options: dict[str, Any] = {"endpoint": hub_server.url, "token": False}
    out = str(tmp_path / "optimized")
    assert optimize_hf(repo, out, split="train", chunk_size=4, num_workers=1, storage_options=options) == out
    rows = sorted((row["id"], row["text"]) for row in StreamingDataset(out))
    assert rows == [(i, f"t{i}") for i in range(TOTAL)]
    mtime = (tmp_path / "optimized" / "index.json").stat().st_mtime_ns
    optimize_hf(repo, out, storage_options=options)  # kept: output_dir already holds index.json
    assert (tmp_path / "optimized" / "index.json").stat().st_mtime_ns == mtime


@pytest.mark.anyio
async def test_astream_indexes_an_hf_parquet_dataset(repo: str, hub_server: HubServer) -> None:
    """``astream("hf://...")`` indexes the Parquet repository on first use, as StreamingDataset, and keeps it."""
    from litstream import astream

    options: dict[str, Any] = {"endpoint": hub_server.url, "token": False}
    start = len(hub_server.requests)
    rows = [row async for row in astream(repo, storage_options=options)]
    assert [row["id"] for row in rows] == list(range(TOTAL))
    assert rows[7] == {"id": 7, "text": "t7"}
    first = parquet_requests(hub_server, start)
    assert len([h for _, h in first if "range" in h]) == 2 * len(ROWS)  # footers only: tail, then footer

    before = len(hub_server.requests)
    async with astream(repo, storage_options=options, shuffle=True, item_loader=ParquetLoader(columns=["id"])) as s:
        ids = [row["id"] async for row in s]
    assert sorted(ids) == list(range(TOTAL))
    assert ids != list(range(TOTAL))
    again = parquet_requests(hub_server, before)
    assert len(again) == len(ROWS)
    assert not [h for _, h in again if "range" in h]  # the kept index: no footer read again
    with pytest.raises(ConfigurationError, match="ParquetLoader"):
        async for _ in astream(repo, storage_options=options, item_loader=TokensLoader(block_size=4)):
            pass


def test_the_repository_root_lists_parquet_files_recursively(repo: str, hub_server: HubServer, tmp_path: Path) -> None:
    """LitData 0.2.76 lists ``.parquet`` files recursively under an hf:// URL: the Hub keeps them in ``data/``."""
    root = repo.removesuffix("/data")
    extra = hub_server.dataset_dir(root.removeprefix("hf://datasets/")) / "data" / "more"
    extra.mkdir()
    (extra / "train-00003.parquet").write_bytes(parquet_file(TOTAL, 3))
    (extra / "notes.txt").write_text("not parquet")
    options: dict[str, Any] = {"endpoint": hub_server.url, "token": False}
    ds = StreamingDataset(root, storage_options=options, cache_dir=tmp_path / "cache")
    # files in name order, as LitData sorts them: data/more/... before data/train-...
    assert [row["id"] for row in ds] == [*range(TOTAL, TOTAL + 3), *range(TOTAL)]
    (kept,) = (tmp_path / "cache").rglob("hf-index/*/index.json")
    names = [c["filename"] for c in json.loads(kept.read_text())["chunks"]]
    assert names == ["data/more/train-00003.parquet", *(f"data/train-{k:05d}.parquet" for k in range(len(ROWS)))]
