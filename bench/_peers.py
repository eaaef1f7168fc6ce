"""The other peers of the end-to-end benchmark: MosaicML streaming (MDS) and WebDataset.

Each writes the benchmark's samples (``_e2e_data.make_sample``) in its own format and reads them back
with its own reader, exactly as a user of that library would:

* ``mosaic`` (``mosaicml-streaming``, installed ``--no-deps``): written with ``MDSWriter`` (columns
  ``image: ndarray:uint8:3,64,64``, ``label: int``, ``name: str``, ``size_limit`` 64 MB), read with its
  ``StreamingDataset(local=...)``; the loader is torch's ``DataLoader`` (mosaic's own
  ``StreamingDataLoader`` needs ``transformers``, which is not installed). Its package ``__init__``
  imports ``transformers`` too, so :func:`import_mosaic` registers the ``streaming`` packages without
  running their ``__init__`` files (as ``tests/compat/mds_writer.py`` does) and imports mosaic's real
  modules. With ``LITSTREAM_BENCH_MOSAIC=1`` in the environment (set by ``e2e_case.py`` for mosaic
  runs) the registration also happens when this module is imported, so a spawned DataLoader worker,
  which re-imports the main script before unpickling the dataset, can import mosaic's modules too.
* ``webdataset``: written with ``ShardWriter`` (tar shards of at most 64 MB; members ``image.npy``,
  ``label.cls``, ``name.txt``), read with ``WebDataset(shards).decode()`` renamed to the benchmark's
  keys; the loader is torch's ``DataLoader``, which splits the shards between workers.

No peer has a parallel writer comparable to ``optimize(num_workers=2)``: both write in one process.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from pathlib import Path
from typing import Any

PEERS = ("mosaic", "webdataset")
DISTRIBUTIONS = {"mosaic": "mosaicml-streaming", "webdataset": "webdataset"}
SHARD_BYTES = 64_000_000
MDS_COLUMNS = {"image": "ndarray:uint8:3,64,64", "label": "int", "name": "str"}


def _register_mosaic_packages() -> None:
    if "streaming.base" in sys.modules:
        return
    spec = importlib.util.find_spec("streaming")
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError("mosaicml-streaming is not installed")
    root = os.path.dirname(spec.origin)
    for name, path in (("streaming", root), ("streaming.base", os.path.join(root, "base"))):
        if name not in sys.modules:
            package = types.ModuleType(name)
            package.__path__ = [path]
            sys.modules[name] = package


if os.environ.get("LITSTREAM_BENCH_MOSAIC") == "1":
    _register_mosaic_packages()


def import_mosaic() -> Any:
    """mosaic's ``streaming.base.dataset`` module (its ``StreamingDataset``)."""
    _register_mosaic_packages()
    import streaming.base.dataset as mosaic_dataset

    return mosaic_dataset


def import_peer(library: str) -> None:
    """Import ``library``'s reader (outside any timing); raises if it does not import here."""
    if library == "mosaic":
        import_mosaic()
    else:
        __import__(library)


def available(library: str) -> str | None:
    """``None`` when ``library``'s reader imports in a fresh interpreter, else why not (one line)."""
    import subprocess

    bench = str(Path(__file__).resolve().parent)
    script = f"import sys; sys.path.insert(0, {bench!r}); import _peers; _peers.import_peer({library!r})"
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=False, timeout=300)
    if proc.returncode == 0:
        return None
    lines = (proc.stderr or proc.stdout).strip().splitlines()
    return lines[-1] if lines else f"exit status {proc.returncode}"


def write(library: str, out: str, samples: int) -> int:
    """Write ``samples`` samples in ``library``'s format under ``out``; returns the number written."""
    from _e2e_data import make_sample

    Path(out).mkdir(parents=True, exist_ok=True)
    if library == "mosaic":
        _register_mosaic_packages()
        from streaming.base.format.mds.writer import MDSWriter

        with MDSWriter(out=out, columns=MDS_COLUMNS, size_limit=SHARD_BYTES) as writer:
            for i in range(samples):
                writer.write(make_sample(i))
        return samples
    import webdataset as wds

    with wds.ShardWriter(os.path.join(out, "shard-%06d.tar"), maxsize=SHARD_BYTES, verbose=0) as sink:
        for i in range(samples):
            sample = make_sample(i)
            sink.write({"__key__": f"s{i:07d}", "image.npy": sample["image"], "label.cls": sample["label"],
                        "name.txt": sample["name"]})  # fmt: skip
    return samples


def _rename(sample: dict[str, Any]) -> dict[str, Any]:
    return {"image": sample["image.npy"], "label": sample["label.cls"], "name": sample["name.txt"]}


def dataset(library: str, source: str) -> Any:
    """``library``'s own dataset over its own format in ``source`` (samples: image, label, name)."""
    if library == "mosaic":
        mosaic = import_mosaic()
        return mosaic.StreamingDataset(local=source, shuffle=False, batch_size=256)
    import webdataset as wds

    shards = sorted(str(p) for p in Path(source).glob("shard-*.tar"))
    return wds.WebDataset(shards, shardshuffle=False, empty_check=False).decode().map(_rename)


def loader(library: str, data: Any, workers: int, batch_size: int) -> Any:
    """torch's ``DataLoader`` over a peer's dataset (default collate: stacked images, label tensor)."""
    from torch.utils.data import DataLoader

    context = "spawn" if library == "mosaic" and workers else None  # mosaic's file locks refuse a fork
    return DataLoader(data, batch_size=batch_size, num_workers=workers, multiprocessing_context=context)
