"""What the simulated store serves: the dataset's real index, and chunk bytes (real or synthesised).

Everything here runs before the simulation starts, on the real clock, through the real store: the index is
read once, and in ``"synthesise"`` mode the first chunk once (to take a real sample as the template). The
simulated store then serves ``index.json`` and chunk bytes from memory (or, in ``"read"`` mode, from the local
chunk files) without any further real I/O that the virtual clock could not see.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from .._core._errors import ConfigurationError, FormatError
from ..format._chunk import header_length, pack_chunk
from ..format._compression import compress
from ..format._index import INDEX_FILENAME, ChunkInfo, Index
from ..format.arrow._chunk import ArrowChunk
from ..read.cache._verify import has_checksum
from ..read.source._index_load import load_index, load_local_index
from ..read.source._source import DatasetSource
from ..storage._files import local_path
from ..storage._resolver import store_for

if TYPE_CHECKING:
    from ..storage._base import Store
    from ._config import SimulationConfig

__all__ = ["SimDataset", "prepare_dataset"]

_MAX_CHUNK = 2**32 - 1
"""The most bytes a chunk can hold (its offsets are uint32)."""
_MAX_FETCH = 2**30
"""The most chunk bytes ``chunks: read`` reads into memory from a remote dataset."""


@dataclass
class SimDataset:
    """The bytes a simulated store serves.

    Attributes:
        url: The dataset's URL or directory (for messages).
        index: The index the simulated readers see.
        index_bytes: ``index.json`` as served.
        template: One real sample's item bytes (``"synthesise"`` mode), else ``None``.
        root: The local directory holding the chunk files (``"read"`` mode), else ``None``.
        wire_ratio: Bytes on the wire per recorded ``chunk_bytes`` (below 1 for compressed chunks).
        remote: Whether the real dataset is remote (``StreamingDataset`` then prefetches at least 4 chunks).
        fetched: A remote dataset's real chunk files, read before the simulation (``"read"`` mode), else ``None``.
    """

    url: str
    index: Index
    index_bytes: bytes
    template: bytes | None = None
    root: Path | None = None
    wire_ratio: float = 1.0
    remote: bool = False
    fetched: dict[str, bytes] | None = None
    _made: OrderedDict[tuple[int, int], bytes] = field(default_factory=OrderedDict)
    _names: dict[str, ChunkInfo] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._names = {c.filename: c for c in self.index.chunks}

    def wire_size(self, filename: str) -> int:
        """Bytes a GET of ``filename`` moves (the recorded size, scaled for compression)."""
        if filename == INDEX_FILENAME:
            return len(self.index_bytes)
        if self.fetched is not None and filename in self.fetched:
            return len(self.fetched[filename])
        if self.root is not None and filename in self._names:
            return (self.root / filename).stat().st_size  # the real file (a compressed one is shorter)
        info = self._names.get(filename)
        return 0 if info is None else max(1, int(info.chunk_bytes * self.wire_ratio))

    def content_size(self, filename: str) -> int:
        """The recorded ``chunk_bytes`` of chunk ``filename`` (its content once decompressed); 0 for other files."""
        info = self._names.get(filename)
        return 0 if info is None else info.chunk_bytes

    def has(self, filename: str) -> bool:
        """Whether the store holds ``filename``."""
        return filename == INDEX_FILENAME or filename in self._names

    def body(self, filename: str) -> bytes:
        """The bytes of ``filename`` (synthesised chunks are built once per distinct shape and kept)."""
        if filename == INDEX_FILENAME:
            return self.index_bytes
        if self.fetched is not None:
            return self.fetched[filename]
        if self.root is not None:
            return (self.root / filename).read_bytes()
        info = self._names[filename]
        assert self.template is not None
        key = (info.chunk_size, info.chunk_bytes)
        made = self._made.get(key)
        if made is None:
            compression = self.index.config.compression if self.index.config else None
            made = _synthesise(self.template, key[0], key[1], compression)
            self._made[key] = made
            while len(self._made) > 8:
                self._made.popitem(last=False)
        return made


def _synthesise(template: bytes, items: int, size: int, compression: str | None) -> bytes:
    """A valid chunk of ``items`` copies of ``template``, zero-padded to at least ``size`` bytes."""
    data = pack_chunk([template] * items)
    if len(data) < size:
        data += bytes(size - len(data))
    return compress(data, compression) if compression else data


async def prepare_dataset(config: SimulationConfig) -> SimDataset:
    """Read what the simulation needs from the real dataset (real clock, real store).

    Raises:
        FormatError: with ``chunks="synthesise"``, an index recording a chunk no real chunk could be.
        ConfigurationError: ``chunks="read"`` for a dataset without local chunk files, a dataset without a
            chunk to take a template sample from, or ``chunks="synthesise"`` for a token dataset.
        DatasetNotFoundError: no index there.
    """
    store = store_for(config.dataset, config.storage_options or None)
    if config.index_path is not None:
        index = await load_local_index(config.index_path)
    else:
        index = await load_index(store)
    if not index.chunks:
        raise ConfigurationError(f"simulate: the dataset {config.dataset} holds no chunks; nothing to simulate")
    if config.chunks == "read":
        root = local_path(store, INDEX_FILENAME)
        if root is None:
            return await _fetch_all(config, store, index)
        raw = Path(config.index_path) if config.index_path else root
        raw = raw / INDEX_FILENAME if raw.is_dir() else raw
        return SimDataset(config.dataset, index, raw.read_bytes(), root=root.parent)
    if index.config is not None and index.config.item_loader == "TokensLoader":
        raise ConfigurationError(
            f"simulate: {config.dataset} is a token dataset, whose chunks cannot be synthesised (each records its "
            "token count); use chunks='read' with a local copy"
        )
    source = await DatasetSource.open(store, allow_pickle=True)
    first = await source.read_chunk(0)
    if isinstance(first, ArrowChunk):
        raise ConfigurationError(
            f"simulate: {config.dataset} stores its samples as Arrow chunks (optimize's default for dict samples of "
            "JSON-like values), which cannot be synthesised from one item; use chunks='read' with a local copy, "
            "or write the dataset with chunk_format='pytree'"
        )
    template = bytes(first.item(0))
    served = _without_checksums(index)
    compression = index.config.compression if index.config else None
    ratio = 1.0
    if compression:
        info = index.chunks[0]
        ratio = (await store.head(info.filename)).size / max(1, info.chunk_bytes)
    _check_synthesisable(index, len(template), config.dataset)
    remote = local_path(store, INDEX_FILENAME) is None
    return SimDataset(
        config.dataset, served, served.to_json().encode(), template=template, wire_ratio=ratio, remote=remote
    )


async def _fetch_all(config: SimulationConfig, store: Store, index: Index) -> SimDataset:
    """A remote dataset served from its real chunk files, all read into memory first (at most 1 GiB).

    Raises:
        ConfigurationError: the chunks hold more than :data:`_MAX_FETCH` bytes.
    """
    total = sum(c.chunk_bytes for c in index.chunks)
    if total > _MAX_FETCH:
        raise ConfigurationError(
            f"simulate: chunks='read' for the remote dataset {config.dataset} would read {total} bytes into memory "
            f"(at most {_MAX_FETCH}); use chunks='synthesise', or a local copy"
        )
    fetched: dict[str, bytes] = {}
    limiter = anyio.CapacityLimiter(8)

    async def one(name: str) -> None:
        async with limiter:
            fetched[name] = await store.get(name)

    async with anyio.create_task_group() as tg:
        for info in index.chunks:
            tg.start_soon(one, info.filename)
    return SimDataset(config.dataset, index, index.to_json().encode(), fetched=fetched, remote=True)


def _check_synthesisable(index: Index, item_bytes: int, where: str) -> None:
    """Refuse an index whose chunks could not be real (a header longer than the chunk, more than 4 GiB): the
    bytes synthesised for it are bounded by what a real chunk can hold.

    Raises:
        FormatError: naming the first such chunk.
    """
    for info in index.chunks:
        made = header_length(info.chunk_size) + info.chunk_size * item_bytes
        if header_length(info.chunk_size) > info.chunk_bytes or max(made, info.chunk_bytes) > _MAX_CHUNK:
            raise FormatError(
                f"simulate: {where}'s index.json records {info.filename} with chunk_size={info.chunk_size} and "
                f"chunk_bytes={info.chunk_bytes}, which no chunk can hold (its header alone needs "
                f"{header_length(info.chunk_size)} bytes; chunks hold at most 4 GiB); fix or regenerate the index"
            )


def _without_checksums(index: Index) -> Index:
    """The index without per-chunk checksums: synthesised bytes cannot match the recorded ones."""
    if not any(has_checksum(c) for c in index.chunks):
        return index
    chunks = [dataclasses.replace(c, extra={}) for c in index.chunks]
    return dataclasses.replace(index, chunks=tuple(chunks))
