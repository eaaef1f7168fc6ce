"""Parquet on a real S3 server (SeaweedFS on 127.0.0.1): indexed by footer range reads, index uploaded, streamed."""

from __future__ import annotations

import io
import json
from typing import TYPE_CHECKING

import anyio
import pyarrow as pa
import pyarrow.parquet as pq
from storage_backends import unique

from litstream import ParquetLoader, StreamingDataset, index_parquet_dataset
from litstream.storage._resolver import store_for

if TYPE_CHECKING:
    from servers import S3Server

ROWS = (7, 5, 9)


def parquet_file(start: int, rows: int) -> bytes:
    sink = io.BytesIO()
    table = pa.table({"id": list(range(start, start + rows)), "text": [f"t{i}" for i in range(start, start + rows)]})
    pq.write_table(table, sink, row_group_size=4)
    return sink.getvalue()


def test_index_parquet_dataset_on_s3(s3_server: S3Server) -> None:
    url = f"s3://{s3_server.bucket}/{unique()}"
    options = s3_server.options()
    store = store_for(url, options)
    files, start = {}, 0
    for k, n in enumerate(ROWS):
        files[f"part-{k}.parquet"] = parquet_file(start, n)
        start += n

    async def seed() -> None:
        for name, data in files.items():
            await store.put(name, data)

    anyio.run(seed)
    index = index_parquet_dataset(url, storage_options=options)
    uploaded = json.loads(anyio.run(store.get, "index.json"))
    assert uploaded == json.loads(index.to_json())
    assert [(c["filename"], c["chunk_size"], c["chunk_bytes"]) for c in uploaded["chunks"]] == [
        (name, n, len(files[name])) for name, n in zip(files, ROWS, strict=True)
    ]
    assert uploaded["config"]["data_format"] == ["int64", "string"]
    ds = StreamingDataset(url, item_loader=ParquetLoader(), storage_options=options, shuffle=True)
    assert len(ds) == sum(ROWS)
    assert sorted((r["id"], r["text"]) for r in ds) == [(i, f"t{i}") for i in range(sum(ROWS))]
    assert ds[8] == {"id": 8, "text": "t8"}
