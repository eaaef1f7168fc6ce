"""optimize → stream → stop → resume, with the data on each storage backend (real servers)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from storage_backends import unique

from dataset_files import in_version_log
from litstream import StreamingDataLoader, StreamingDataset, astream, optimize

if TYPE_CHECKING:
    from servers import AzuriteServer, GCSServer, HubServer, S3Server

N = 60


def sample(i: int) -> dict[str, Any]:
    return {"i": i, "name": f"item-{i}"}


def _location(name: str, request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, Any] | None, bool]:
    """(url, storage_options, written in place) for one backend; read-only ones are seeded from a local copy."""
    prefix = unique()
    local = tmp_path / "local"
    if name == "local":
        return str(local), None, True
    if name == "s3":
        s3: S3Server = request.getfixturevalue("s3_server")
        return f"s3://{s3.bucket}/{prefix}", s3.options(), True
    if name == "azure":
        az: AzuriteServer = request.getfixturevalue("azure_server")
        return f"azure://litstream-test/{prefix}", az.options(), True
    # the pytree layout, whose items ds[i] reads with range reads (test_random_access_...); the locations written
    # here (local, s3, azure) hold optimize's default layout, Arrow rows for these samples
    optimize(
        fn=sample, inputs=range(N), output_dir=local, chunk_size=7, num_workers=1, verbose=False, chunk_format="pytree"
    )
    files = {p.name: p.read_bytes() for p in local.iterdir() if not in_version_log(p.name)}  # the data files
    if name == "gcs":
        gcs: GCSServer = request.getfixturevalue("gcs_server")
        for key, data in files.items():
            gcs.upload("litstream-test", f"{prefix}/{key}", data)
        return f"gs://litstream-test/{prefix}", gcs.options(), False
    hub: HubServer = request.getfixturevalue("hub_server")
    if name == "http":
        folder = hub.root / "static" / prefix
        folder.mkdir(parents=True)
        for key, data in files.items():
            (folder / key).write_bytes(data)
        return f"{hub.url}/static/{prefix}", None, False
    repo = hub.dataset_dir(f"org/{prefix}") / "data"
    repo.mkdir(parents=True)
    for key, data in files.items():
        (repo / key).write_bytes(data)
    return f"hf://datasets/org/{prefix}/data", {"endpoint": hub.url, "token": False}, False


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "workers"), [("local", 2), ("s3", 2), ("azure", 2), ("gcs", 0), ("http", 0), ("hf", 0)]
)
def test_optimize_stream_stop_resume(name: str, workers: int, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    url, options, write_here = _location(name, request, tmp_path)
    if write_here:
        optimize(
            fn=sample,
            inputs=range(N),
            output_dir=url,
            chunk_size=7,
            num_workers=2,
            verbose=False,
            storage_options=options,
        )

    def loader() -> StreamingDataLoader:
        ds = StreamingDataset(url, shuffle=True, storage_options=options)
        return StreamingDataLoader(ds, batch_size=4, num_workers=workers)

    first = loader()
    assert len(first) == 15
    seen: list[int] = []
    for k, batch in enumerate(first):
        seen += batch["i"].tolist()
        if k == 4:
            break
    state = first.state_dict()
    resumed = loader()
    resumed.load_state_dict(state)
    rest = [x for batch in resumed for x in batch["i"].tolist()]
    assert len(seen) == 20
    assert sorted(seen + rest) == list(range(N))

    ds = StreamingDataset(url, storage_options=options)
    assert [ds[i]["name"] for i in (0, 13, N - 1)] == ["item-0", "item-13", f"item-{N - 1}"]

    async def collect() -> list[int]:
        async with astream(url, storage_options=options) as samples:
            return [s["i"] async for s in samples]

    assert anyio.run(collect) == list(range(N))
    assert anyio.run(collect, backend="trio") == list(range(N))


def _written_on_s3(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, dict[str, Any] | None]:
    """(url, storage_options) of :data:`N` samples that one worker wrote to S3, 7 a chunk (9 chunks)."""
    url, options, _ = _location("s3", request, tmp_path)
    optimize(
        fn=sample, inputs=range(N), output_dir=url, chunk_size=7, num_workers=1, verbose=False, storage_options=options
    )
    return url, options


@pytest.mark.slow
def test_remote_chunks_go_through_the_local_cache(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    url, options = _written_on_s3(request, tmp_path)
    cache = tmp_path / "cache"
    ds = StreamingDataset(url, storage_options=options, cache_dir=cache)
    assert [s["i"] for s in ds] == list(range(N))
    cached = sorted(p.name for p in cache.rglob("chunk-*.bin"))
    assert cached == sorted(
        f"chunk-{r}-{k}.bin" for r, k in [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (0, 5), (0, 6), (0, 7), (0, 8)]
    )
    # one dataset version directory: <root>/<md5(url)>/<updated_at>/
    (version,) = [p for p in cache.iterdir() if p.is_dir()]
    assert len([p for p in version.iterdir() if p.is_dir()]) == 1


@pytest.mark.slow
def test_b33_cache_smaller_than_a_chunk_does_not_block(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    url, options = _written_on_s3(request, tmp_path)
    cache = tmp_path / "cache"
    loader = StreamingDataLoader(
        StreamingDataset(url, storage_options=options, cache_dir=cache, max_cache_size=10), batch_size=5
    )
    assert sorted(x for b in loader for x in b["i"].tolist()) == list(range(N))
    assert len(list(cache.rglob("chunk-*.bin"))) <= 1


@pytest.mark.slow
def test_random_access_on_a_remote_dataset_uses_range_reads(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    url, options, _ = _location("http", request, tmp_path)
    hub: HubServer = request.getfixturevalue("hub_server")
    ds = StreamingDataset(url, storage_options=options)
    assert len(ds) == N
    before = len(hub.requests)
    assert ds[23] == sample(23)
    chunk_requests = [(m, p, h) for m, p, h in hub.requests[before:] if "chunk-" in p]
    assert chunk_requests, "ds[i] read nothing"
    assert all(m == "GET" and "range" in h for m, _, h in chunk_requests)
    assert not list(Path(os.environ["LITSTREAM_CACHE_DIR"]).rglob("chunk-*"))  # nothing downloaded whole
