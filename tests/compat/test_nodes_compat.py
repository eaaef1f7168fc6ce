"""A 2-node optimize simulated by two processes with different ``DATA_OPTIMIZER_*`` values writing to one
S3 prefix (SeaweedFS); the real LitData reads the merged dataset sample-identical."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import uuid
from typing import TYPE_CHECKING, Any

import pytest

import litstream
from dataset_files import without_version_log
from peer import require_peer

if TYPE_CHECKING:
    from pathlib import Path

    from servers import S3Server

litdata = require_peer("litdata")

pytestmark = [
    pytest.mark.litdata,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:unclosed file:ResourceWarning"),
]

N = 30

NODE_SCRIPT = """
import json, sys

from litstream import optimize


def sample(i):
    return {"i": i, "name": f"item-{i}", "score": i / 4, "raw": bytes(range(i % 7))}


if __name__ == "__main__":
    # the pytree layout: LitData 0.2.76's ds[i] over S3 fails on Arrow rows (the default for these samples):
    # it reads the row's empty item bytes (struct.error)
    optimize(sample, list(range(30)), sys.argv[1], chunk_size=4, num_workers=int(sys.argv[3]),
             storage_options=json.loads(sys.argv[2]), verbose=False, chunk_format="pytree")
"""


def sample(i: int) -> dict[str, Any]:
    return {"i": i, "name": f"item-{i}", "score": i / 4, "raw": bytes(range(i % 7))}


def run_nodes(tmp_path: Path, url: str, options: dict[str, str], num_nodes: int, workers: int) -> None:
    script = tmp_path / "node.py"
    script.write_text(NODE_SCRIPT)
    base = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), url, json.dumps(options), str(workers)],
            env={**base, "DATA_OPTIMIZER_NUM_NODES": str(num_nodes), "DATA_OPTIMIZER_NODE_RANK": str(rank)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for rank in range(num_nodes)
    ]
    for rank, proc in enumerate(procs):
        _, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, f"node {rank} failed: {err.decode()}"


def test_two_nodes_write_one_dataset_that_litdata_reads(
    tmp_path: Path, s3_server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    import boto3

    # LitData's obstore download path cannot reach a plain-HTTP endpoint (it never sets allow_http, and its
    # S3Store ignores AWS_ALLOW_HTTP); its boto3 path can, so LitData reads the bucket through boto3 here.
    import litdata.streaming.downloader

    monkeypatch.setattr(litdata.streaming.downloader, "_OBSTORE_AVAILABLE", False)

    prefix = f"nodes-{uuid.uuid4().hex[:10]}"
    url = f"s3://{s3_server.bucket}/{prefix}"
    options = s3_server.options()
    run_nodes(tmp_path, url, options, num_nodes=2, workers=1)  # 2 workers per node: test_optimize_nodes.py

    client = boto3.client("s3", **options)
    listed = client.list_objects_v2(Bucket=s3_server.bucket, Prefix=prefix + "/")["Contents"]
    keys = sorted(without_version_log(o["Key"][len(prefix) + 1 :] for o in listed))
    # 30 inputs over 2 global ranks, 15 each in chunks of 4; the node partials are merged and removed.
    expected_chunks = [f"chunk-{r}-{n}.bin" for r in range(2) for n in range(4)]
    assert keys == sorted(["index.json", *expected_chunks])
    index = json.loads(client.get_object(Bucket=s3_server.bucket, Key=f"{prefix}/index.json")["Body"].read())
    assert [c["filename"] for c in index["chunks"]] == expected_chunks
    assert [c["chunk_size"] for c in index["chunks"]] == [4, 4, 4, 3, 4, 4, 4, 3]

    expected = [sample(i) for i in range(N)]
    assert list(litstream.StreamingDataset(url, storage_options=options)) == expected
    peer = litdata.StreamingDataset(url, storage_options=options, cache_dir=str(tmp_path / "litdata-cache"))
    assert len(peer) == N
    assert list(peer) == expected
    assert peer[17] == expected[17]
    del peer
    gc.collect()
