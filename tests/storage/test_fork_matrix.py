"""Every dataset under torch's own ``DataLoader``, with every start method, after every kind of use in the parent.

The matrix: ``StreamingDataset``, ``StreamingRawDataset``, ``CombinedStreamingDataset`` and
``ParallelStreamingDataset`` over a local folder, S3 (SeaweedFS) and HTTP (the Hub layout), read by
``torch.utils.data.DataLoader`` with ``fork`` (0, 2 and 4 workers, and 2 persistent workers for two
epochs, after: construction plus an upload through obstore, ``len``, ``ds[i]`` and a full iteration in the
parent), and with ``spawn`` and ``forkserver`` (2 persistent workers after all of those; their workers
start from scratch, so one sample of sources per dataset keeps the cost down). Each epoch must hold
exactly the dataset's samples.

Chunks read into memory, never cached (``cache_chunks=False``, ``storage/_memory_fetch.py``): the S3
``StreamingDataset``, ``CombinedStreamingDataset`` and ``ParallelStreamingDataset`` under each start method
(3 x 3 = 9 scenarios; each reads one epoch with 0 workers in the scenario process, then two epochs with 2
persistent workers, so 0 and 2 workers are covered for every face and method): exactly the samples, and
not a file in the cache directories.

Each scenario runs in a fresh process (``tests/fork_scenario.py``), which is what forks: never the
threaded pytest worker. Before litstream rebuilt obstore clients in forked workers, every ``fork`` case
over S3 failed with "obstore cannot be used across fork".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from storage_backends import unique

if TYPE_CHECKING:
    from servers import HubServer, S3Server

SCENARIO = Path(__file__).resolve().parents[1] / "fork_scenario.py"
N = 24  # fork_scenario.N
B_OFFSET = 1000  # fork_scenario.B_OFFSET
DATASETS = ["streaming", "raw", "combined", "parallel"]
SOURCES = ["local", "s3", "http"]

FORK_CASES = [(d, s, "fork") for d in DATASETS for s in SOURCES]
# spawn/forkserver: each dataset once per start method; S3 under spawn, the sources rotated under forkserver
FRESH_CASES = [(d, "s3", "spawn") for d in DATASETS] + [
    (d, s, "forkserver") for d, s in zip(DATASETS, ["local", "s3", "http", "s3"], strict=True)
]

MEMORY_CASES = [(d, c) for d in ["streaming", "combined", "parallel"] for c in ["fork", "forkserver", "spawn"]]


def epoch(kind: str) -> list[Any]:
    """One epoch's samples, sorted as the scenario prints them."""
    if kind == "combined":
        return list(range(N)) + [B_OFFSET + i for i in range(N)]
    if kind == "parallel":
        return [[i, B_OFFSET + i] for i in range(N)]
    return list(range(N))


def expected(kind: str, light: bool) -> dict[str, list[list[Any]]]:
    one = epoch(kind)
    if light:
        return {"iterated": [one], "persistent": [one, one]}
    out = {"built": [one], "len": [one]}
    if kind in ("streaming", "raw"):
        out["getitem"] = [one]
    out |= {"iterated": [one, one], "persistent": [one, one]}
    return out


def run_scenario(
    kind: str,
    source: str,
    context: str,
    s3: S3Server,
    hub: HubServer,
    tmp_path: Path,
    cache_chunks: bool | None = None,
) -> dict[str, list[list[Any]]]:
    light = context != "fork"
    cfg = {
        "cache_chunks": cache_chunks,
        "dataset": kind,
        "source": source,
        "context": context,
        "light": light,
        "workdir": str(tmp_path),
        "prefix": unique(),
        "s3": {"endpoint": s3.endpoint, "bucket": s3.bucket, "access_key": s3.access_key, "secret_key": s3.secret_key},
        "hub_root": str(hub.root),
        "hub_url": hub.url,
    }
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    proc = subprocess.run(
        [sys.executable, str(SCENARIO), json.dumps(cfg)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-6000:]
    out: dict[str, list[list[Any]]] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "source", "context"), FORK_CASES + FRESH_CASES)
def test_torch_dataloader(
    kind: str, source: str, context: str, s3_server: S3Server, hub_server: HubServer, tmp_path: Path
) -> None:
    got = run_scenario(kind, source, context, s3_server, hub_server, tmp_path)
    assert got == expected(kind, light=context != "fork")


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "context"), MEMORY_CASES)
def test_torch_dataloader_without_a_chunk_cache(
    kind: str, context: str, s3_server: S3Server, hub_server: HubServer, tmp_path: Path
) -> None:
    got = run_scenario(kind, "s3", context, s3_server, hub_server, tmp_path, cache_chunks=False)
    one = epoch(kind)
    assert got == {"workers0": [one], "workers2": [one, one]}
    cache = tmp_path / "cache"
    assert [p.relative_to(cache).as_posix() for p in cache.rglob("*") if not p.is_dir()] == []
