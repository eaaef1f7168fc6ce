"""One scenario of tests/storage/test_fork_matrix.py, run as ``python fork_scenario.py '<json>'`` in a fresh process.

The scenario writes its data (an ``optimize`` in this process; to S3 through obstore when the source is
S3, and always one upload through obstore to S3), builds one dataset and reads it with torch's own
``DataLoader`` under the given start method after each kind of use in this, the parent, process:

* ``built``: right after the dataset was made (and the upload);
* ``len``: after ``len(ds)``;
* ``getitem``: after ``ds[i]`` (map-style datasets; the composites skip it);
* ``iterated``: after a full iteration in this process;
* ``persistent``: two epochs of one loader with ``persistent_workers=True``.

With ``"cache_chunks": false`` (S3; ``StreamingDataset`` and the composites) every member reads its remote
chunks into memory and never into its cache directory; the steps are then ``workers0`` (one epoch of a
loader without workers, in this process) and ``workers2`` (two epochs of 2 persistent workers started
with the given method, after that in-process epoch), and the test checks that the cache directories
stayed empty.

With ``"light": true`` (for ``spawn`` and ``forkserver``, whose workers start from scratch and cost
seconds each) only ``iterated`` (in this process, after ``len`` and ``ds[i]``) and ``persistent`` run.

It prints one JSON object ``{step: [epoch samples, ...]}`` with each epoch's samples sorted (an int per
sample; a pair for ``ParallelStreamingDataset``). The test compares them with the expected multisets.

Being a fresh process without threads of its own, it is what forks (never the pytest worker).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

N = 24  # samples per dataset (and files of the raw dataset)
B_OFFSET = 1000  # the second member of a composite holds B_OFFSET + 0 .. N - 1


def _sample(i: int) -> int:
    return i


def _second(i: int) -> int:
    return B_OFFSET + i


def _as_int(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray)):
        return int(value.decode())
    if isinstance(value, (tuple, list)):
        return tuple(_as_int(v) for v in value)
    return int(value)


def _prepare(cfg: dict[str, Any]) -> tuple[list[str], dict[str, Any] | None]:
    """Write the member datasets where ``cfg["source"]`` says; return their locations and storage options."""
    from litstream import optimize
    from litstream.storage._resolver import store_for

    work = Path(cfg["workdir"])
    source, kind = cfg["source"], cfg["dataset"]
    s3 = cfg["s3"]
    s3_options = {
        "endpoint_url": s3["endpoint"],
        "aws_access_key_id": s3["access_key"],
        "aws_secret_access_key": s3["secret_key"],
        "region_name": "us-east-1",
    }
    s3_root = f"s3://{s3['bucket']}/{cfg['prefix']}"
    fns = [_sample, _second][: 2 if kind in ("combined", "parallel") else 1]
    names = ["a", "b"][: len(fns)]
    # Whatever the source: this process uploads through obstore before any loader forks.
    store = store_for(f"{s3_root}/upload", s3_options)
    import anyio

    anyio.run(store.put, "marker.bin", b"uploaded by the parent")
    if kind == "raw":
        files = {f"f{i:03d}.txt": str(i).encode() for i in range(N)}
        if source == "local":
            folder = work / "raw"
            folder.mkdir()
            for key, data in files.items():
                (folder / key).write_bytes(data)
            return [str(folder)], None
        if source == "s3":
            raw = store_for(f"{s3_root}/raw", s3_options)
            for key, data in files.items():
                anyio.run(raw.put, key, data)
            return [f"{s3_root}/raw"], s3_options
        folder = Path(cfg["hub_root"]) / "org" / cfg["prefix"] / "main" / "raw"
        folder.mkdir(parents=True)
        for key, data in files.items():
            (folder / key).write_bytes(data)
        return [f"hf://datasets/org/{cfg['prefix']}/raw"], {"endpoint": cfg["hub_url"], "token": False}
    urls: list[str] = []
    for name, fn in zip(names, fns, strict=True):
        if source == "s3":  # optimize to S3 in this process: its uploads go through obstore here
            url = f"{s3_root}/{name}"
            optimize(fn, range(N), url, chunk_size=4, num_workers=1, verbose=False, storage_options=s3_options)
            urls.append(url)
            continue
        local = work / name
        optimize(fn, range(N), str(local), chunk_size=4, num_workers=1, verbose=False)
        if source == "local":
            urls.append(str(local))
            continue
        folder = Path(cfg["hub_root"]) / "static" / cfg["prefix"] / name
        folder.mkdir(parents=True)
        from dataset_files import data_files  # beside this script (on sys.path when run)

        for path in data_files(local):
            (folder / path.name).write_bytes(path.read_bytes())
        urls.append(f"{cfg['hub_url']}/static/{cfg['prefix']}/{name}")
    return urls, s3_options if source == "s3" else None


def _dataset(kind: str, urls: list[str], options: dict[str, Any] | None, cache: Path, cache_chunks: bool | None) -> Any:
    from litstream import CombinedStreamingDataset, ParallelStreamingDataset, StreamingDataset, StreamingRawDataset

    if kind == "raw":
        return StreamingRawDataset(urls[0], cache_dir=cache / "raw", storage_options=options)
    members = [
        StreamingDataset(url, storage_options=options, cache_dir=cache / str(k), cache_chunks=cache_chunks)
        for k, url in enumerate(urls)
    ]
    if kind == "streaming":
        return members[0]
    if kind == "combined":
        return CombinedStreamingDataset(members)
    return ParallelStreamingDataset(members)


def _epochs(ds: Any, context: str, workers: int, *, persistent: bool = False, epochs: int = 1) -> list[list[Any]]:
    from torch.utils.data import DataLoader

    loader = DataLoader(
        ds,
        batch_size=4,
        num_workers=workers,
        collate_fn=list,
        multiprocessing_context=context if workers else None,
        persistent_workers=persistent,
        timeout=120 if workers else 0,  # a hung worker ends the scenario with an error, not a hang
    )
    return [sorted(_as_int(s) for batch in loader for s in batch) for _ in range(epochs)]


def main(cfg: dict[str, Any]) -> dict[str, list[list[Any]]]:
    urls, options = _prepare(cfg)
    kind, context = cfg["dataset"], cfg["context"]
    ds = _dataset(kind, urls, options, Path(cfg["workdir"]) / "cache", cfg.get("cache_chunks"))
    out: dict[str, list[list[Any]]] = {}
    if cfg.get("cache_chunks") is False:  # in memory: no workers, then workers after that use in this process
        out["workers0"] = _epochs(ds, context, 0)
        out["workers2"] = _epochs(ds, context, 2, persistent=True, epochs=2)
        return out
    if cfg.get("light"):  # spawn/forkserver: every use in the parent first, then one persistent loader
        assert len(ds) > 0
        if kind in ("streaming", "raw"):
            assert _as_int(ds[3]) == 3
        out["iterated"] = [sorted(_as_int(s) for s in ds)]
        out["persistent"] = _epochs(ds, context, 2, persistent=True, epochs=2)
        return out
    out["built"] = _epochs(ds, context, 2)
    assert len(ds) > 0
    out["len"] = _epochs(ds, context, 4)
    if kind in ("streaming", "raw"):
        assert _as_int(ds[3]) == 3
        out["getitem"] = _epochs(ds, context, 0)
    iterated = sorted(_as_int(s) for s in ds)
    out["iterated"] = [iterated, *_epochs(ds, context, 2)]
    out["persistent"] = _epochs(ds, context, 2, persistent=True, epochs=2)
    return out


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    print(json.dumps(main(json.loads(sys.argv[1]))))
