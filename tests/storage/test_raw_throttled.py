"""``StreamingRawDataset``'s adaptive concurrency sees throttled requests that the store would retry silently.

A real HTTP server answers 503 to scripted requests (the Hub-layout server of ``tests/servers.py``; SeaweedFS
cannot be told to). The raw fetcher GETs through the store's ``without_retries()`` twin and retries in its
own loop, by the store's retry settings: each 503 counts in ``statistics().failures`` and ``retries`` and
halves the adaptive limit, as docs/raw.md says, and every file still arrives intact. Both stores that retry
inside their client are covered: the httpx one behind ``hf://`` and obstore's S3 client (pointed at the same
server in path style: ``GET /static/<key>`` is a plain file there).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from storage_backends import unique

from litstream import StreamingRawDataset
from litstream.read.raw._fetch import _INITIAL_LIMIT, FetchConfig, RawFetcher
from litstream.storage._resolver import store_for

if TYPE_CHECKING:
    from servers import HubServer

FAST_RETRIES = {"backoff_initial": 0.001, "backoff_max": 0.01}
N = 12
FAILING = (1, 4, 9)  # files whose first two GETs get a 503


def _files() -> dict[str, bytes]:
    return {f"f{i:02d}.bin": bytes((i * 7 + k) % 256 for k in range(100 + i)) for i in range(N)}


@pytest.mark.parametrize("fixed", [None, 8])
def test_a_raw_dataset_over_the_hub_counts_every_503(hub_server: HubServer, tmp_path: Any, fixed: int | None) -> None:
    name = unique()
    folder = hub_server.dataset_dir(f"org/{name}") / "data"
    folder.mkdir()
    files = _files()
    for key, data in files.items():
        (folder / key).write_bytes(data)
    ds = StreamingRawDataset(
        f"hf://datasets/org/{name}/data",
        cache_dir=tmp_path / "cache",
        storage_options={"endpoint": hub_server.url, **FAST_RETRIES},
        max_concurrent_downloads=fixed,
    )
    keys = sorted(files)
    for i in FAILING:
        hub_server.failures[f"/datasets/org/{name}/resolve/main/data/{keys[i]}"] = 2
    assert [ds[i] for i in range(len(ds))] == [files[k] for k in keys]
    stats = ds.statistics()
    assert stats.failures == 2 * len(FAILING)
    assert stats.retries == 2 * len(FAILING)
    assert stats.objects == N
    if fixed is None:
        assert stats.concurrency < _INITIAL_LIMIT  # halved on the failures (it only grows after a whole round)
    else:
        assert stats.concurrency == fixed


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_the_raw_fetcher_counts_503s_that_obstore_would_retry(hub_server: HubServer, anyio_backend: str) -> None:
    prefix = unique()
    folder = hub_server.root / "static" / prefix
    folder.mkdir(parents=True)
    files = _files()
    for key, data in files.items():
        (folder / key).write_bytes(data)
    options = {
        "endpoint_url": hub_server.url,
        "aws_access_key_id": "test",
        "aws_secret_access_key": "test",
        "region_name": "us-east-1",
        **FAST_RETRIES,
    }
    store = store_for(f"s3://static/{prefix}", options)
    fetcher = RawFetcher(store, FetchConfig(), remote=True)
    keys = sorted(files)
    for i in FAILING:
        hub_server.failures[f"/static/{prefix}/{keys[i]}"] = 2
    got = await fetcher.fetch_many(keys, [len(files[k]) for k in keys])
    assert got == [files[k] for k in keys]
    stats = fetcher.statistics()
    assert (stats.failures, stats.retries) == (2 * len(FAILING), 2 * len(FAILING))
    assert stats.concurrency < _INITIAL_LIMIT // 2  # halved per failure (regrown by a quarter per round at most)
    assert all(hub_server.failures[f"/static/{prefix}/{keys[i]}"] == 0 for i in FAILING)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_the_store_retry_budget_still_ends_a_long_outage(hub_server: HubServer, anyio_backend: str) -> None:
    from litstream import RetriesExhaustedError

    prefix = unique()
    (hub_server.root / "static" / prefix).mkdir(parents=True)
    (hub_server.root / "static" / prefix / "a.bin").write_bytes(b"a")
    store = store_for(f"{hub_server.url}/static/{prefix}", {"max_retries": 3, **FAST_RETRIES})
    fetcher = RawFetcher(store, FetchConfig(), remote=True)
    hub_server.failures[f"/static/{prefix}/a.bin"] = 10
    with pytest.raises(RetriesExhaustedError, match="failed 4 times"):
        await fetcher.fetch("a.bin", 1)
    assert fetcher.statistics().failures == 4
    assert hub_server.failures[f"/static/{prefix}/a.bin"] == 6  # 1 try + max_retries=3, each seen here
