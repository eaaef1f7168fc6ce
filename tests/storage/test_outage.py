"""Object-store outages: the default retry policy rides them out; a spent budget says what happened."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import pytest
from outage_server import OutageServer
from storage_backends import unique

from litstream import RetriesExhaustedError, StreamingDataLoader, StreamingDataset, optimize
from litstream.storage._resolver import store_for
from servers import free_port

if TYPE_CHECKING:
    from pathlib import Path

    from servers import HubServer

N = 480
CHUNK = 12  # 40 chunks


def sample(i: int) -> dict[str, Any]:
    return {"i": i, "pad": bytes(i % 251 for _ in range(512))}


@pytest.mark.slow
@pytest.mark.parametrize(("fault", "downtime"), [("restart", 5.0), ("pause", 30.0)])
def test_epoch_rides_out_an_outage_with_default_settings(fault: str, downtime: float, tmp_path: Path) -> None:
    """Kill and restart the server 5 s later, or freeze it for 30 s, after a few batches: every sample once."""
    with OutageServer(tmp_path / "server") as server:
        s3 = server.server
        url = f"s3://{s3.bucket}/ds"
        options = s3.options()
        optimize(fn=sample, inputs=range(N), output_dir=url, chunk_size=CHUNK, num_workers=1, storage_options=options)
        cache = tmp_path / "cache"
        ds = StreamingDataset(url, storage_options=options, cache_dir=cache, shuffle=True)
        loader = StreamingDataLoader(ds, batch_size=4, num_workers=2)
        seen: list[int] = []
        cached_at_fault: int | None = None
        back = None
        for k, batch in enumerate(loader):
            seen += batch["i"].tolist()
            if k == 2:  # the fault starts from the consumer loop, after three batches
                if fault == "restart":
                    server.kill()
                    back = server.in_background(downtime, "start")
                else:
                    server.pause()
                    back = server.in_background(downtime, "resume")
                cached_at_fault = len(list(cache.rglob("chunk-*.bin")))
        assert back is not None
        back.join()
        assert back.error is None  # type: ignore[attr-defined]
    assert cached_at_fault is not None
    assert cached_at_fault < N // CHUNK  # chunks were still to be fetched when the server went away
    assert len(seen) == N
    assert sorted(seen) == list(range(N))


@pytest.mark.slow
def test_spent_deadline_names_url_attempts_and_time() -> None:
    """A store that stays down past a short ``retry_timeout`` ends in RetriesExhaustedError with the facts."""
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there: the server is down
    options = {"endpoint_url": endpoint, "aws_access_key_id": "k", "aws_secret_access_key": "s", "retry_timeout": 1.5}
    with pytest.raises(RetriesExhaustedError) as info:
        ds = StreamingDataset("s3://bucket/down", storage_options=options)
        next(iter(ds))
    message = str(info.value)
    assert "s3://bucket/down/" in message
    found = re.search(r"after (\d+) attempts in (\d+\.\d) s", message)
    assert found is not None, message
    assert int(found.group(1)) >= 2
    assert 1.5 <= float(found.group(2)) < 60
    assert "retry_timeout" in message  # how to give more
    assert info.value.__cause__ is not None  # obstore's own error is kept


@pytest.mark.anyio
async def test_http_spent_deadline_names_url_attempts_and_time(hub_server: HubServer) -> None:
    name = unique()
    (hub_server.root / "static" / name).mkdir(parents=True)
    (hub_server.root / "static" / name / "a.bin").write_bytes(b"payload")
    hub_server.failures[f"/static/{name}/a.bin"] = 10_000
    options = {"retry_timeout": 0.5, "backoff_initial": 0.01, "backoff_max": 0.05}
    store = store_for(f"{hub_server.url}/static/{name}", options)
    with pytest.raises(RetriesExhaustedError) as info:
        await store.get("a.bin")
    hub_server.failures.pop(f"/static/{name}/a.bin")
    message = str(info.value)
    found = re.search(r"after (\d+) attempts in (\d+\.\d) s", message)
    assert found is not None, message
    attempts = int(found.group(1))
    assert attempts >= 2
    assert float(found.group(2)) >= 0.5
    assert f"{hub_server.url}/static/{name}/a.bin" in message
    assert "HTTP 503" in message
    assert [r[1] for r in hub_server.requests].count(f"/static/{name}/a.bin") == attempts
