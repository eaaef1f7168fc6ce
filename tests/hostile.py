"""Helpers for the hardening tests: small datasets written in-process, an audit of opened files, and a
pickle payload that leaves a mark when it is unpickled."""

from __future__ import annotations

import contextlib
import json
import os
import pathlib
import sys
import threading
from typing import TYPE_CHECKING, Any

from litstream.format._chunk import chunk_filename, pack_chunk
from litstream.format._compression import compress
from litstream.format._index import ChunkInfo, DatasetConfig, Index
from litstream.format._loaders import SampleEncoder

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from pathlib import Path


def write_dataset(
    directory: Path, samples: Sequence[Any], *, chunk_size: int, compression: str | None = None
) -> dict[str, Any]:
    """Write ``samples`` as a LitData-format dataset in ``directory`` (no workers); return the index object."""
    directory.mkdir(parents=True, exist_ok=True)
    encoder = SampleEncoder()
    items = [encoder.encode(s) for s in samples]
    chunks = []
    for number, start in enumerate(range(0, len(items), chunk_size)):
        raw = pack_chunk(items[start : start + chunk_size])
        name = chunk_filename(0, number, compression)
        (directory / name).write_bytes(compress(raw, compression) if compression else raw)
        chunks.append(ChunkInfo(name, len(items[start : start + chunk_size]), len(raw)))
    config = DatasetConfig(
        data_format=encoder.data_format, data_spec=encoder.data_spec, chunk_size=chunk_size, compression=compression
    )
    index = Index(chunks=tuple(chunks), config=config, updated_at="1.5")
    text = index.to_json()
    (directory / "index.json").write_text(text)
    obj: dict[str, Any] = json.loads(text)
    return obj


class _Audit:
    """Every path opened (``open`` audit events) while :meth:`watch` is active, from any thread."""

    def __init__(self) -> None:
        self.active = 0
        self.paths: list[str] = []
        self.lock = threading.Lock()
        sys.addaudithook(self._hook)

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if self.active and event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
            path = os.fsdecode(args[0])
            with self.lock:
                self.paths.append(os.path.abspath(path))

    @contextlib.contextmanager
    def watch(self) -> Iterator[list[str]]:
        opened: list[str] = []
        with self.lock:
            self.active += 1
            start = len(self.paths)
        try:
            yield opened
        finally:
            with self.lock:
                self.active -= 1
                opened.extend(self.paths[start:])


_AUDIT: _Audit | None = None


def opened_files() -> contextlib.AbstractContextManager[list[str]]:
    """A context manager giving the list of absolute paths opened inside it (filled on exit)."""
    global _AUDIT
    if _AUDIT is None:
        _AUDIT = _Audit()  # an audit hook cannot be removed: install one, switched on and off
    return _AUDIT.watch()


def outside(paths: Sequence[str], *allowed: Path) -> list[str]:
    """The paths not below any of ``allowed`` (directories), ignoring Python's own files."""
    roots = [os.path.abspath(a) + os.sep for a in allowed]
    skip = (sys.prefix, sys.base_prefix, os.path.dirname(os.__file__), "/proc/", "/sys/", "/dev/")
    return [p for p in paths if not any(p.startswith(r) for r in roots) and not p.startswith(skip)]


class Marker:
    """Unpickling this object creates the file ``path`` (proof that ``pickle.loads`` ran)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (pathlib.Path.touch, (pathlib.Path(self.path),))
