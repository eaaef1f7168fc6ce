"""Remote stores against the real servers: custom endpoints (B34), credentials, failures, timeouts, retries."""

from __future__ import annotations

import socket
from typing import TYPE_CHECKING

import anyio
import pytest
from storage_backends import unique

from litstream import ObjectNotFoundError, StorageError
from litstream.storage._resolver import store_for
from litstream.storage._store import HedgedStore, TransferConfig

if TYPE_CHECKING:
    from collections.abc import Iterator

    from servers import AzuriteServer, HubServer, S3Server

pytestmark = pytest.mark.anyio

FAST_FAIL = TransferConfig(timeout=0.5, connect_timeout=0.5, max_retries=1, backoff_initial=0.01, retry_timeout=2)


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never answers (a hung server)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield int(s.getsockname()[1])


@pytest.fixture
def dead_endpoint() -> str:
    """An http URL on 127.0.0.1 where nothing listens."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


async def test_b34_custom_endpoint_is_honoured_by_every_operation(
    s3_server: S3Server, dead_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """B34: storage_options' endpoint_url reaches get, get_range(s), head, list, put and delete alike.

    The environment points every AWS client at a dead endpoint with wrong keys: any operation that
    ignored storage_options would fail.
    """
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.setenv(name, dead_endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "wrong")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wrong")
    url = f"s3://{s3_server.bucket}/{unique()}/ds"
    store = store_for(url, s3_server.options())
    await store.put("index.json", b'{"chunks": []}')
    await store.put("chunk-0-0.bin", bytes(range(64)))
    assert await store.get("index.json") == b'{"chunks": []}'
    assert await store.get_range("chunk-0-0.bin", 8, 4) == bytes(range(8, 12))
    assert await store.get_ranges("chunk-0-0.bin", [0, 60], [2, 4]) == [b"\x00\x01", bytes(range(60, 64))]
    assert (await store.head("chunk-0-0.bin")).size == 64
    assert [m.path for m in await store.list()] == ["chunk-0-0.bin", "index.json"]
    await store.delete("chunk-0-0.bin")
    with pytest.raises(ObjectNotFoundError):
        await store.get("chunk-0-0.bin")


async def test_s3_credentials_and_endpoint_from_the_environment(
    s3_server: S3Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint)
    monkeypatch.setenv("AWS_ALLOW_HTTP", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret_key)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    store = store_for(f"s3://{s3_server.bucket}/{unique()}")
    await store.put("x.bin", b"from env")
    assert await store.get("x.bin") == b"from env"


async def test_s3_wrong_credentials_are_a_storage_error_with_a_hint(s3_server: S3Server) -> None:
    options = {**s3_server.options(), "aws_secret_access_key": "not-the-secret"}
    store = store_for(f"s3://{s3_server.bucket}/{unique()}", options)
    with pytest.raises(StorageError, match="check the credentials") as info:
        await store.get("x.bin")
    assert "Debug source" not in str(info.value)


async def test_s3_anonymous_access_is_refused_by_a_server_with_auth(s3_server: S3Server) -> None:
    store = store_for(f"s3://{s3_server.bucket}/{unique()}", {"endpoint_url": s3_server.endpoint, "anon": True})
    with pytest.raises(StorageError, match="put failed"):
        await store.put("x.bin", b"x")


async def test_azure_connection_string(azure_server: AzuriteServer) -> None:
    store = store_for(f"azure://litstream-test/{unique()}", {"connection_string": azure_server.connection_string()})
    await store.put("x.bin", b"conn")
    assert await store.get("x.bin") == b"conn"


async def test_azure_missing_container_is_a_storage_error(azure_server: AzuriteServer) -> None:
    store = store_for("azure://no-such-container/p", azure_server.options())
    with pytest.raises(StorageError, match="no-such-container"):
        await store.put("x.bin", b"x")


async def test_obstore_request_timeout_and_retries_are_applied(silent_port: int) -> None:
    options = {
        "endpoint_url": f"http://127.0.0.1:{silent_port}",
        "aws_access_key_id": "k",
        "aws_secret_access_key": "s",
    }
    store = store_for("s3://bucket/p", options, transfer=FAST_FAIL)
    with anyio.fail_after(15):
        with pytest.raises(StorageError, match=r"get failed for s3://bucket/p/x\.bin"):
            await store.get("x.bin")


async def test_unreachable_endpoint_is_a_storage_error(dead_endpoint: str) -> None:
    options = {"endpoint_url": dead_endpoint, "aws_access_key_id": "k", "aws_secret_access_key": "s"}
    store = store_for("s3://bucket/p", options, transfer=FAST_FAIL)
    with anyio.fail_after(15), pytest.raises(StorageError, match="list failed"):
        await store.list()


async def test_http_retries_scripted_503s(hub_server: HubServer) -> None:
    name = unique()
    (hub_server.root / "static" / name).mkdir(parents=True)
    (hub_server.root / "static" / name / "a.bin").write_bytes(b"payload")
    hub_server.failures[f"/static/{name}/a.bin"] = 2
    store = store_for(f"{hub_server.url}/static/{name}", transfer=TransferConfig(backoff_initial=0.01))
    assert await store.get("a.bin") == b"payload"
    assert [r[1] for r in hub_server.requests].count(f"/static/{name}/a.bin") == 3
    hub_server.failures[f"/static/{name}/a.bin"] = 10
    store = store_for(f"{hub_server.url}/static/{name}", transfer=FAST_FAIL)
    with pytest.raises(StorageError, match="HTTP 503"):
        await store.get("a.bin")


async def test_http_read_timeout(silent_port: int) -> None:
    store = store_for(f"http://127.0.0.1:{silent_port}/ds", transfer=FAST_FAIL)
    with anyio.fail_after(15), pytest.raises(StorageError, match="ReadTimeout"):
        await store.get_range("a.bin", 0, 10)


async def test_http_range_past_the_end(hub_server: HubServer) -> None:
    name = unique()
    (hub_server.root / "static" / name).mkdir(parents=True)
    (hub_server.root / "static" / name / "a.bin").write_bytes(b"0123")
    store = store_for(f"{hub_server.url}/static/{name}")
    assert await store.get_range("a.bin", 2, 0) == b""
    with pytest.raises(StorageError, match="past the end"):
        await store.get_range("a.bin", 10, 2)


async def test_hub_endpoint_token_and_paginated_listing(hub_server: HubServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:1")  # the explicit endpoint below must win
    repo = f"org/{unique()}"
    files = {"index.json": b"{}", "chunk-0-0.bin": b"aa", "chunk-0-1.bin": b"bbb", "sub/chunk-1-0.bin": b"c"}
    for key, data in files.items():
        path = hub_server.dataset_dir(repo, "refs/convert/x") / "ds" / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    first = len(hub_server.requests)
    options = {"endpoint": hub_server.url, "token": "hf_secret"}
    store = store_for(f"hf://datasets/{repo}@refs%2Fconvert%2Fx/ds", options)
    listing = [(m.path, m.size) for m in await store.list()]
    assert listing == [("chunk-0-0.bin", 2), ("chunk-0-1.bin", 3), ("index.json", 2), ("sub/chunk-1-0.bin", 1)]
    assert [m.path for m in await store.list("sub/")] == ["sub/chunk-1-0.bin"]
    assert await store.get("chunk-0-1.bin") == b"bbb"
    seen = hub_server.requests[first:]
    assert sum(1 for r in seen if r[1].startswith("/api/datasets/")) >= 2  # page_size 2: followed Link: next
    assert all(r[2].get("authorization") == "Bearer hf_secret" for r in seen)
    assert await store_for(f"hf://datasets/{repo}@refs%2Fconvert%2Fx/nothing", options).list() == []
    with pytest.raises(ObjectNotFoundError, match="RepoNotFound"):
        await store_for("hf://datasets/org/no-such-repo", options).list()


async def test_hedged_reads_over_s3(s3_server: S3Server) -> None:
    """Duplicates race real requests; the losers' worker threads are abandoned, not waited for."""
    store = store_for(f"s3://{s3_server.bucket}/{unique()}", s3_server.options())
    data = bytes(range(256)) * 16
    await store.put("x.bin", data)
    hedged = HedgedStore(store, hedge_delay=1e-6)  # send the duplicate almost at once (0 means off)
    for i in range(10):
        assert await hedged.get_range("x.bin", i * 100, 50) == data[i * 100 : i * 100 + 50]
    assert await hedged.get_ranges("x.bin", [0, 4000], [4, 96]) == [data[:4], data[4000:]]
    stats = hedged.statistics()
    assert stats.reads == 11
    assert stats.hedges >= 1
