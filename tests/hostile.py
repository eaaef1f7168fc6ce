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

import litstream
from litstream.format._chunk import chunk_filename, pack_chunk
from litstream.format._compression import compress
from litstream.format._index import ChunkInfo, DatasetConfig, Index
from litstream.format._loaders import SampleEncoder

if TYPE_CHECKING:
    import builtins
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
    """The paths not below any of ``allowed`` (directories), ignoring Python's own files and litstream's
    sources (read by the interpreter, e.g. ``linecache`` formatting a traceback)."""
    roots = [os.path.abspath(a) + os.sep for a in allowed]
    package = os.path.dirname(os.path.abspath(litstream.__file__)) + os.sep
    skip = (sys.prefix, sys.base_prefix, os.path.dirname(os.__file__), "/proc/", "/sys/", "/dev/", package)
    return [p for p in paths if not any(p.startswith(r) for r in roots) and not p.startswith(skip)]


class Marker:
    """Unpickling this object creates the file ``path`` (proof that ``pickle.loads`` ran)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (pathlib.Path.touch, (pathlib.Path(self.path),))


# ---------------------------------------------------------------------------------- hostile files on disk


def _unix_socket(path: Path) -> None:
    import socket

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(path))  # leaves the socket file behind once closed
    finally:
        sock.close()


def _replace(path: Path, kind: str, target: Path | None = None) -> None:
    """Replace the file ``path`` by a ``kind``: ``link`` (to ``target``), ``fifo`` or ``socket``."""
    path.unlink()
    if kind == "link":
        assert target is not None
        path.symlink_to(target)
    elif kind == "fifo":
        os.mkfifo(path)
    else:
        _unix_socket(path)


HOSTILE_LAYOUTS = [
    "chunk_links_out",
    "chunk_links_out_relative",
    "folder_links_out",
    "chunk_links_to_device",
    "chunk_is_fifo",
    "chunk_is_socket",
    "chunk_is_directory",
    "index_links_out",
    "index_is_fifo",
]
"""Ways a dataset directory can reach outside itself or block a reader; :func:`hostile_layout` builds them."""


def hostile_layout(tmp_path: Path, layout: str) -> tuple[Path, str]:
    """A dataset at ``tmp_path / "ds"`` laid out as ``layout``; returns it and the name of the hostile file.

    Every link leads to a VALID copy of the file it replaces, outside the dataset: a reader that followed
    it would serve samples instead of raising.
    """
    ds = tmp_path / "ds"
    obj = write_dataset(ds, [{"i": i} for i in range(6)], chunk_size=3)
    outside_dir = tmp_path / "outside"
    outside_dir.mkdir()
    chunk = ds / "chunk-0-0.bin"
    copy = outside_dir / "chunk-0-0.bin"
    copy.write_bytes(chunk.read_bytes())
    (outside_dir / "index.json").write_text((ds / "index.json").read_text())
    if layout == "chunk_links_out":
        _replace(chunk, "link", copy)
    elif layout == "chunk_links_out_relative":
        _replace(chunk, "link", pathlib.Path("..") / "outside" / "chunk-0-0.bin")
    elif layout == "folder_links_out":
        (ds / "sub").symlink_to(outside_dir)
        obj["chunks"][0]["filename"] = "sub/chunk-0-0.bin"
        (ds / "index.json").write_text(json.dumps(obj))
        chunk = ds / "sub" / "chunk-0-0.bin"
    elif layout == "chunk_links_to_device":
        _replace(chunk, "link", pathlib.Path("/dev/zero"))
    elif layout == "chunk_is_fifo":
        _replace(chunk, "fifo")
    elif layout == "chunk_is_socket":
        _replace(chunk, "socket")
    elif layout == "chunk_is_directory":
        chunk.unlink()
        chunk.mkdir()
    elif layout == "index_links_out":
        _replace(ds / "index.json", "link", outside_dir / "index.json")
        chunk = ds / "index.json"
    elif layout == "index_is_fifo":
        _replace(ds / "index.json", "fifo")
        chunk = ds / "index.json"
    else:
        raise ValueError(layout)
    return ds, str(chunk)


def hostile_raw_folder(tmp_path: Path, layout: str) -> tuple[Path, str]:
    """A raw-file folder with one good file ``a.txt`` and a hostile ``b.txt`` (``layout``: ``link_out``,
    ``folder_link_out``, ``fifo``, ``socket``); returns the folder and the hostile file's path."""
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "b.txt").write_bytes(b"a secret outside the dataset")
    folder = tmp_path / "raw"
    folder.mkdir()
    (folder / "a.txt").write_bytes(b"hello")
    bad = folder / "b.txt"
    if layout == "link_out":
        bad.symlink_to(secret / "b.txt")
    elif layout == "folder_link_out":
        (folder / "sub").symlink_to(secret)
        bad = folder / "sub" / "b.txt"
    elif layout == "fifo":
        os.mkfifo(bad)
    elif layout == "socket":
        _unix_socket(bad)
    else:
        raise ValueError(layout)
    return folder, str(bad)


# ---------------------------------------------------------------------------------- injected listing faults


class FaultStore:
    """A :class:`~litstream.Store` that forwards to ``inner`` but fails its first ``faults`` listings the way
    a listing cut short does (``kind``: ``"truncated"`` — the body ends early — or ``"reset"`` — the
    connection is reset), as errors mapped by the store layer. A real server cannot do this on demand."""

    def __init__(self, inner: Any, faults: int, kind: str = "truncated") -> None:
        self._inner = inner
        self.faults = faults
        self.kind = kind
        self.listings = 0

    @property
    def url(self) -> str:
        return str(self._inner.url)

    @property
    def transfer(self) -> Any:
        return self._inner.transfer

    async def list(self, prefix: str = "") -> Any:
        from litstream.storage._base import mapped_errors

        self.listings += 1
        if self.faults > 0:
            self.faults -= 1
            with mapped_errors("list", f"{self.url}/{prefix}"):
                if self.kind == "reset":
                    raise ConnectionResetError(104, "Connection reset by peer")
                raise EOFError("ListObjectsV2 response body ended after 311 of 2048 bytes")
        return await self._inner.list(prefix)

    async def get(self, path: str) -> bytes:
        data: bytes = await self._inner.get(path)
        return data

    async def get_range(self, path: str, start: int, length: int) -> bytes:
        data: bytes = await self._inner.get_range(path, start, length)
        return data

    async def get_ranges(self, path: str, starts: Sequence[int], lengths: Sequence[int]) -> builtins.list[bytes]:
        data: builtins.list[bytes] = await self._inner.get_ranges(path, starts, lengths)
        return data

    async def put(self, path: str, data: Any) -> None:
        await self._inner.put(path, data)

    async def head(self, path: str) -> Any:
        return await self._inner.head(path)

    async def delete(self, path: str) -> None:
        await self._inner.delete(path)
