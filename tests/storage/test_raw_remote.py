"""StreamingRawDataset on real servers: S3 (SeaweedFS), Azure (Azurite), the Hub layout (hf://), and an outage."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import pytest
from storage_backends import unique

from clean_process import run_clean
from litstream import StreamingRawDataset
from litstream.storage._resolver import store_for

if TYPE_CHECKING:
    from servers import AzuriteServer, HubServer, S3Server

N = 30


def contents(n: int = N) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for i in range(n):
        out[f"{'x' if i % 3 else 'y'}/f{i:03d}.bin"] = bytes((i + k) % 256 for k in range(200 + 37 * i))
    return out


def upload(url: str, options: dict[str, Any], files: dict[str, bytes]) -> None:
    store = store_for(url, options)

    async def put_all() -> None:
        async with anyio.create_task_group() as tg:
            for key, data in files.items():
                tg.start_soon(store.put, key, data)

    anyio.run(put_all)


def check_everything(url: str, options: dict[str, Any], files: dict[str, bytes], cache: Path) -> None:
    """len, ds[i], the loader with 0 and 2 workers, and the async form on asyncio and trio: every file once."""
    ds = StreamingRawDataset(url, cache_dir=cache, storage_options=options)
    assert len(ds) == len(files)
    keys = sorted(files)
    assert [f.path for f in ds.files] == [f"{url}/{k}" for k in keys]
    assert ds[0] == files[keys[0]]
    assert ds[len(ds) - 1] == files[keys[-1]]
    expected = sorted(files.values())
    assert sorted(item for batch in _loader(ds, 0) for item in batch) == expected
    # workers: forked from a clean helper process (never from the threaded pytest worker)
    assert run_clean(_two_forked_workers, url, options, cache) == expected

    async def consume() -> list[bytes]:
        async with ds.astream(shuffle=True, window=7) as items:
            return [item async for item in items]

    for backend in ("asyncio", "trio"):
        assert sorted(anyio.run(consume, backend=backend)) == expected


def _loader(ds: StreamingRawDataset, workers: int) -> Any:
    from torch.utils.data import DataLoader

    context = "fork" if workers else None
    return DataLoader(
        ds, batch_size=4, shuffle=True, num_workers=workers, collate_fn=list, multiprocessing_context=context
    )


def _two_forked_workers(url: str, options: dict[str, Any], cache: Path) -> list[bytes]:
    """In the clean process: make the dataset (this process then has used obstore), read with 2 forked workers."""
    ds = StreamingRawDataset(url, cache_dir=cache, storage_options=options)
    assert ds[0]  # the parent reads before the workers fork
    return sorted(item for batch in _loader(ds, 2) for item in batch)


def test_s3(s3_server: S3Server, tmp_path: Path) -> None:
    url, options, files = f"s3://{s3_server.bucket}/{unique()}", s3_server.options(), contents()
    upload(url, options, files)
    check_everything(url, options, files, tmp_path / "cache")


def test_azure(azure_server: AzuriteServer, tmp_path: Path) -> None:
    url, options, files = f"azure://litstream-test/{unique()}", azure_server.options(), contents()
    upload(url, options, files)
    check_everything(url, options, files, tmp_path / "cache")


def test_hub(hub_server: HubServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    name = unique()
    folder = hub_server.dataset_dir(f"org/{name}") / "data"
    files = contents()
    for key, data in files.items():
        (folder / key).parent.mkdir(parents=True, exist_ok=True)
        (folder / key).write_bytes(data)
    monkeypatch.setenv("HF_TOKEN", "hf_secret_token")
    start = len(hub_server.requests)
    check_everything(f"hf://datasets/org/{name}/data", {"endpoint": hub_server.url}, files, tmp_path / "cache")
    sent = [headers.get("authorization") for _, _, headers in hub_server.requests[start:]]
    assert sent
    assert set(sent) == {"Bearer hf_secret_token"}  # HF_TOKEN goes with every request, listing included


@pytest.mark.slow
def test_a_server_restart_mid_epoch_loses_nothing(tmp_path: Path) -> None:
    """Kill SeaweedFS after a few batches and start it again 3 s later: every file exactly once."""
    from outage_server import OutageServer
    from torch.utils.data import DataLoader

    files = contents(120)
    with OutageServer(tmp_path / "server") as server:
        s3 = server.server
        url, options = f"s3://{s3.bucket}/raw", s3.options()
        upload(url, options, files)
        ds = StreamingRawDataset(url, cache_dir=tmp_path / "cache", storage_options=options, max_prefetch=0)
        loader = DataLoader(ds, batch_size=4, num_workers=0, collate_fn=list)
        seen: list[bytes] = []
        back = None
        for k, batch in enumerate(loader):
            seen += batch
            if k == 2:
                server.kill()
                back = server.in_background(3.0, "start")
        assert back is not None
        back.join()
        assert back.error is None  # type: ignore[attr-defined]
    assert len(seen) == len(files)
    assert sorted(seen) == sorted(files.values())


_NO_MAIN_GUARD_SCRIPT = """
import sys
from torch.utils.data import DataLoader
from litstream import StreamingRawDataset
from litstream.storage._obstore_fork import obstore_used
url, endpoint, key, secret, cache = sys.argv[1:]
options = {"endpoint_url": endpoint, "aws_access_key_id": key, "aws_secret_access_key": secret}
ds = StreamingRawDataset(url, cache_dir=cache, storage_options=options)
assert obstore_used(), "the listing did not run in this process"
loader = DataLoader(ds, batch_size=4, num_workers=2, collate_fn=list, multiprocessing_context="fork")
print(sum(len(item) for batch in loader for item in batch))
"""


def test_a_script_without_a_main_guard_lists_s3_and_forks_workers(s3_server: S3Server, tmp_path: Path) -> None:
    """No constructor starts a process: a script without ``if __name__ == "__main__":`` (spawned children
    would run it again) makes the dataset (listing S3 in this process), then forked workers read it."""
    import subprocess
    import sys

    url, options, files = f"s3://{s3_server.bucket}/{unique()}", s3_server.options(), contents()
    upload(url, options, files)
    script = tmp_path / "train.py"
    script.write_text(_NO_MAIN_GUARD_SCRIPT)
    args = [url, s3_server.endpoint, s3_server.access_key, s3_server.secret_key, str(tmp_path / "cache")]
    done = subprocess.run(
        [sys.executable, str(script), *args], capture_output=True, text=True, timeout=600, check=False, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout.split()[-1]) == sum(map(len, files.values()))


def test_s3_cache_files_keeps_copies_and_paths(s3_server: S3Server, tmp_path: Path) -> None:
    """cache_files=True keeps each fetched file under the cache folder and reads it from there next time."""
    url, options, files = f"s3://{s3_server.bucket}/{unique()}", s3_server.options(), contents()
    upload(url, options, files)
    keys = sorted(files)
    cache = tmp_path / "cache"
    ds = StreamingRawDataset(url, cache_dir=cache, storage_options=options, cache_files=True)
    assert [ds[i] for i in range(len(ds))] == [files[k] for k in keys]
    kept = Path(ds.cache_dir)
    assert {k: (kept / k).read_bytes() for k in keys} == files  # LitData's layout: <cache>/<md5>/<key>

    # the copies are used: delete every object but one, whose copy is cut short (so it is fetched again)
    store = store_for(url, options)
    for key in keys[1:]:
        anyio.run(store.delete, key)
    (kept / keys[0]).write_bytes(b"short")
    paths = StreamingRawDataset(
        url, cache_dir=cache, storage_options=options, cache_files=True, item_type="path", transform=Path
    )
    assert list(paths) == [kept / k for k in keys]
    assert (kept / keys[0]).read_bytes() == files[keys[0]]

    async def consume() -> list[Path]:
        return [p async for p in paths.astream(window=4)]

    for backend in ("asyncio", "trio"):
        assert anyio.run(consume, backend=backend) == [kept / k for k in keys]


def test_s3_the_list_is_kept_next_to_the_data(s3_server: S3Server, tmp_path: Path) -> None:
    """As LitData: a fresh list is put at <input_dir>/index.json.zstd, and another machine (cache) reuses it."""
    from litstream.index._raw import decode_index

    url, options, files = f"s3://{s3_server.bucket}/{unique()}", s3_server.options(), contents()
    upload(url, options, files)
    first = StreamingRawDataset(url, cache_dir=tmp_path / "one", storage_options=options)
    store = store_for(url, options)
    kept = decode_index(anyio.run(store.get, "index.json.zstd"), url)
    assert kept == first.files
    anyio.run(store.put, "x/late.bin", b"late")
    second = StreamingRawDataset(url, cache_dir=tmp_path / "two", storage_options=options)
    assert second.files == first.files  # the kept list, not a new listing
    assert (
        len(StreamingRawDataset(url, cache_dir=tmp_path / "three", storage_options=options, recompute_index=True))
        == N + 1
    )
