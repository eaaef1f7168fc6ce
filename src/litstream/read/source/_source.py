"""An opened dataset: its store, its index, its decoder, and whole-chunk and single-item reads."""

from __future__ import annotations

import bisect
import itertools
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import partial
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from ..._core._errors import DatasetNotFoundError, FormatError
from ..._core._trace import CAT_DECOMPRESS, CAT_READ, TRACER
from ...format._chunk import ChunkView, item_span_offset
from ...format._compression import Compression, compression_from_config, decompress
from ...format._config_keys import check_config_keys
from ...format._encrypted import check_encryption, decrypt_chunk, decrypt_item
from ...format._framed import chunk_from_file
from ...format.arrow._chunk import ArrowChunk, ArrowRowsOnly, read_chunk_view
from ...format.arrow._parquet import ParquetChunk, ParquetLoader, RowDecoder
from ...format.mds._index import is_mds_config
from ...storage._files import local_path, map_object, read_span_at
from ..cache._source_cache import CacheSettings, _read_through_cache, open_transfer, read_into_memory
from ..cache._verify import check_chunk, check_local_file, get_checked, has_checksum
from ._decoder_choice import choose_decoder
from ._headers import OffsetTables
from ._index_load import load_local_index, load_versioned_index
from ._inplace import decompressed_in_place
from ._sizes import check_local_sizes

if TYPE_CHECKING:
    import mmap
    import os
    from collections.abc import Callable, Mapping
    from pathlib import Path

    from ...format._index import Index
    from ...format._loaders import PyTreeLoader, SampleDecoder, TokensLoader
    from ...format._serializers import Serializer
    from ...format._temporal import TemporalDecoder
    from ...format._tokens import TokenLayout
    from ...format.mds._encodings import MdsDecoder
    from ...storage._memory_fetch import MemoryFetcher
    from ...storage._store import Store
    from ...storage._transfer import Downloader
    from ..cache._cache import ChunkCache
    from ._versions import VersionRef

__all__ = ["DatasetSource"]


@dataclass
class DatasetSource:
    """Everything needed to read items of one dataset.

    Attributes:
        store: Where the chunk files are.
        index: The parsed ``index.json``.
        decoder: Turns item bytes into samples.
        tokens: For a dataset read with ``TokensLoader(block_size)``, its layout: items are then
            ``block_size``-token windows (``chunk_sizes`` counts windows), else ``None``.
    """

    store: Store
    index: Index
    decoder: SampleDecoder | TokenLayout | RowDecoder | MdsDecoder | ArrowRowsOnly | TemporalDecoder
    _cumulative: list[int] = field(default_factory=list)
    max_decoded_bytes: int = 256 * 2**20
    _chunks: OrderedDict[int, ChunkView] = field(default_factory=OrderedDict)
    _chunks_bytes: int = 0
    cache: ChunkCache | None = None
    downloader: Downloader | None = None
    fetcher: MemoryFetcher | None = None  # a remote dataset read without its disk cache (cache_chunks=False)
    tokens: TokenLayout | None = None
    parquet: ParquetLoader | None = None
    compression: Compression | None = None  # zstd chunks (any compression_level); MDS shards use ``unpack``
    encryption: Any = None
    encryption_level: str | None = None
    unpack: Callable[[bytes | memoryview, str], bytes] = decompress  # whole-file decompression
    offset_tables: OffsetTables = field(default_factory=OffsetTables)  # remote single-item reads
    digest: str | None = None  # the opened version's index digest (read/source/_versions.py); None: a local index_path

    @classmethod
    async def open(
        cls,
        store: Store,
        serializers: Mapping[str, Serializer] | None = None,
        cache: CacheSettings | None = None,
        item_loader: PyTreeLoader | TokensLoader | ParquetLoader | None = None,
        index_path: str | os.PathLike[str] | None = None,
        allow_pickle: bool | None = True,
        encryption: Any = None,
        version: VersionRef | None = None,
        index_bytes: bytes | None = None,
    ) -> DatasetSource:
        """Load the index of the dataset in ``store`` and prepare its decoder.

        Args:
            store: Where the dataset is.
            serializers: Extra serializers by registry key.
            cache: For remote datasets: download chunks into this local cache (``None``: read
                chunks straight into memory).
            item_loader: ``PyTreeLoader()`` (default), ``TokensLoader(block_size)`` or
                ``ParquetLoader()``; must match the loader the dataset was written with.
            index_path: Read the index from this local file (or directory holding ``index.json``)
                instead of from ``store`` — for a Parquet directory indexed elsewhere.
            allow_pickle: ``False`` refuses a dataset with pickled leaves here, before any chunk is
                read (:class:`~litstream.PickleRefusedError`; see ``read/_trust.py``); ``None``: allowed
                unless ``index.json`` carries the trust marker (``format/_trust_marker.py``). Default ``True``.
            encryption: The ``FernetEncryption`` / ``RSAEncryption`` an encrypted dataset was written
                with (``format/_encryption.py``); ``None`` for a plain dataset.
            version: The committed version to open (``read/source/_versions.py``); ``None``: the latest. The opened
                version's index digest is kept in ``digest``, so other processes can open the same one.
            index_bytes: ``index.json``'s bytes already read in this process, used when they are ``version``'s.

        Raises:
            DatasetNotFoundError: no index. VersionNotFoundError: ``version`` is not in the version log.
            FormatError: an index litstream cannot decode.
            ConfigurationError: ``item_loader`` does not match the dataset.
            EncryptionError: an encrypted dataset without (or with a mismatched) ``encryption``.
            PickleRefusedError: ``allow_pickle=False`` and the dataset stores pickled leaves.
            FileNotFoundError: nothing at ``index_path``.
        """
        digest: str | None = None
        if index_path is None:
            index, digest = await load_versioned_index(store, version, known=index_bytes)
        else:
            index = await load_local_index(index_path)
        source = cls.prepared(
            store, index, digest, serializers, item_loader, allow_pickle, encryption, check_sizes=cache is None
        )
        if cache is not None:  # the disk cache, or (cache_chunks) the fetcher into memory
            source.cache, source.downloader, source.fetcher = await anyio.to_thread.run_sync(
                open_transfer, store, index, cache
            )
        return source

    @classmethod
    def prepared(
        cls, store: Store, index: Index, digest: str | None, serializers: Mapping[str, Serializer] | None = None,
        item_loader: PyTreeLoader | TokensLoader | ParquetLoader | None = None, allow_pickle: bool | None = True,
        encryption: Any = None, *, check_sizes: bool = True,
    ) -> DatasetSource:  # fmt: skip
        """The source of a dataset whose ``index`` (of ``digest``, ``None`` when unversioned) is loaded: its
        decoder chosen, nothing read (the synchronous part of :meth:`open`, arguments as there).

        Args:
            check_sizes: Check the local chunk files' sizes against the index (a dataset read in place).

        Raises:
            DatasetNotFoundError, FormatError, ConfigurationError, EncryptionError, PickleRefusedError: as
                :meth:`open`.
        """
        if index.config is None or not index.chunks:
            raise DatasetNotFoundError(f"the dataset in {store.url} has no chunks; optimize produced no sample")
        if not is_mds_config(index.config):
            check_config_keys(index.config.to_json_obj(), index.extra)
        level = check_encryption(index.config.encryption, encryption, store.url)
        if check_sizes:
            check_local_sizes(store, index)  # before any size from the index is used
        chosen = choose_decoder(store.url, index, item_loader, serializers, allow_pickle, encrypted=level is not None)
        source = cls(store, index, chosen.decoder, tokens=chosen.tokens, parquet=chosen.parquet, unpack=chosen.unpack)
        if not is_mds_config(index.config):  # MDS shard codecs go through ``unpack``
            source.compression = compression_from_config(index.config.to_json_obj())
        source._cumulative = list(itertools.accumulate(source.chunk_sizes))
        source.encryption, source.encryption_level = encryption, level
        source.digest = digest
        return source

    @property
    def chunk_sizes(self) -> list[int]:
        """Items per chunk: ``chunk_size`` of each index entry, or its window count for tokens."""
        if self.tokens is not None:
            return list(self.tokens.blocks)
        return [c.chunk_size for c in self.index.chunks]

    def __len__(self) -> int:
        return self._cumulative[-1] if self._cumulative else 0

    def locate(self, index: int) -> tuple[int, int]:
        """``(chunk_index, item_in_chunk)`` of a global item index (0-based, in index order)."""
        chunk = bisect.bisect_right(self._cumulative, index)
        start = self._cumulative[chunk - 1] if chunk else 0
        return chunk, index - start

    def download_ticket(self) -> int | None:
        """A download priority for :meth:`read_chunk` (``None`` when chunks are not downloaded): take
        tickets in the order the chunks are needed, so their downloads finish in that order."""
        transfer = self.fetcher or self.downloader
        return None if transfer is None else transfer.ticket()

    async def read_chunk(
        self,
        chunk_index: int,
        *,
        keep: bool = False,
        priority: int | None = None,
        queued: Callable[[], object] | None = None,
    ) -> ChunkView:
        """Fetch one whole chunk (decompressed) and check its length against ``chunk_bytes``.

        Args:
            chunk_index: Position in ``index.chunks``.
            keep: Remember the chunk for later random access (LRU of at most ``max_decoded_bytes``).
                Streaming reads pass ``False`` so a worker holds only its prefetch window.
            priority: A :meth:`download_ticket`; ``None``: after every download asked for so far.
            queued: Passed to :meth:`Downloader.fetch` (called once the chunk's requests are queued); not
                called when nothing is downloaded.

        Raises:
            FormatError: the file is shorter than the index says (truncated or partial).
            ChecksumError: the chunk does not match its recorded checksum (a cached copy: not even after it
                was deleted and downloaded again; a chunk read into memory: not even when read again).
        """
        cached = self._chunks.get(chunk_index)
        if cached is not None:
            self._chunks.move_to_end(chunk_index)
            return cached
        t0 = perf_counter_ns() if TRACER.on else 0
        info = self.index.chunks[chunk_index]
        compression = self.index.config.compression if self.index.config else None
        data: bytes | memoryview | mmap.mmap
        path: Path | None = None  # the file the bytes are mapped from, if any
        checked = has_checksum(info)  # False once checked, or for LitData's decompressed copy
        # a whole-file compressed chunk's length is not recorded; a "batch"/"sample" file's is chunk_bytes
        whole = compression and (self.compression is None or self.compression.whole_file)
        size, url = None if whole else info.chunk_bytes, f"{self.store.url}/{info.filename}"
        if self.cache is not None and self.downloader is not None:
            verify = info if checked else None  # checked there: a corrupt copy is dropped and downloaded again
            data = await _read_through_cache(
                self.cache, self.downloader, info.filename, size, priority, queued, verify, url
            )
            checked = False
        elif self.fetcher is not None:  # no disk cache: into memory (checked there, fetched again on a mismatch)
            data, checked = await read_into_memory(self.fetcher, info, size, priority, queued, url), False
        elif not compression and (mapped := map_object(self.store, info.filename)) is not None:
            # open + mmap take microseconds and read nothing (pages come later, by populate), so this
            # runs on the loop: a worker-thread hop would cost more than the call
            data, path = mapped
        elif (
            compression
            and self._whole_file_plain()
            and (mapped := decompressed_in_place(self.store, info.filename, compression))
        ):
            data, path = mapped  # the checksum covers the compressed file, gone or not read
            compression, checked = None, False
        elif checked:  # a remote chunk read into memory: one more GET if its bytes do not match
            data, checked = await get_checked(self.store, info), False
        else:
            data = await self.store.get(info.filename)
        if checked:
            if not compression:  # a short file gets the more precise message
                self._check_length(chunk_index, data)
            where = str(path) if path is not None else f"{self.store.url}/{info.filename}"
            # a path here is the local dataset's own file (the cache's are checked above): hashed once, not
            # by every new process (read/cache/_verify.py)
            await anyio.to_thread.run_sync(partial(check_chunk, data, info, path, where, persistent=path is not None))
        t1 = perf_counter_ns() if t0 else 0  # decompression and decryption start
        spec = self.compression if compression else None
        if spec is not None:
            data = await anyio.to_thread.run_sync(
                lambda: chunk_from_file(
                    memoryview(data), spec, filename=info.filename, chunk_size=info.chunk_size,
                    chunk_bytes=info.chunk_bytes,
                )
            )  # fmt: skip
        elif compression:
            data = await anyio.to_thread.run_sync(self.unpack, memoryview(data), compression)
        if self.encryption_level is not None:
            self._check_length(chunk_index, data)  # chunk_bytes counts the encrypted bytes
            where = f"{self.store.url}/{info.filename}"
            data = await anyio.to_thread.run_sync(decrypt_chunk, self.encryption, self.encryption_level, data, where)
        if t0:
            if spec is not None or compression or self.encryption_level is not None:
                TRACER.async_span("decompress", CAT_DECOMPRESS, t1, {"chunk": chunk_index, "bytes": len(data)})
            TRACER.async_span("read", CAT_READ, t0, {"chunk": chunk_index, "file": info.filename})
        return self._checked_view(chunk_index, data, keep)

    def _whole_file_plain(self) -> bool:
        """Whether chunks are whole-file compressed and unencrypted (LitData may decompress them in place)."""
        return (
            self.cache is None
            and self.encryption_level is None
            and (self.compression is None or self.compression.whole_file)
        )

    def maps_in_place(self) -> bool:
        """Whether :meth:`map_local_chunk` maps this dataset's chunks (local, uncompressed, unencrypted files)."""
        return self._unpacked_as_stored() and local_path(self.store, "") is not None

    def _unpacked_as_stored(self) -> bool:
        config = self.index.config
        return not (self.cache is not None or (config and config.compression) or self.encryption_level is not None)

    def map_local_chunk(self, chunk_index: int) -> ChunkView | None:
        """Map one chunk of an uncompressed local dataset now, in the calling thread (open + mmap, no
        read), with :meth:`read_chunk`'s checks; ``None`` for other datasets (use :meth:`read_chunk`).

        Raises:
            ObjectNotFoundError: the chunk file is missing. FormatError: as :meth:`read_chunk`.
        """
        if not self._unpacked_as_stored():
            return None
        cached = self._chunks.get(chunk_index)
        if cached is not None:
            return cached
        t0 = perf_counter_ns() if TRACER.on else 0
        mapped = map_object(self.store, self.index.chunks[chunk_index].filename)
        if mapped is None:  # the store keeps no local files
            return None
        data, path = mapped
        if has_checksum(self.index.chunks[chunk_index]):
            self._check_length(chunk_index, data)  # a short file gets the more precise message
            # a local dataset's own file: hashed once, not by every new process (read/cache/_verify.py)
            check_chunk(data, self.index.chunks[chunk_index], path, str(path), persistent=True)
        if t0:
            TRACER.span("read", CAT_READ, t0, {"chunk": chunk_index, "file": path.name})
        return self._checked_view(chunk_index, data, False)

    def _check_length(self, chunk_index: int, data: bytes | memoryview | mmap.mmap) -> None:
        info = self.index.chunks[chunk_index]
        in_file = self.compression is not None and not self.compression.whole_file  # checked by chunk_from_file
        if not in_file and len(data) < info.chunk_bytes:
            raise FormatError(
                f"{info.filename} holds {len(data)} bytes but index.json records chunk_bytes="
                f"{info.chunk_bytes}; the file is incomplete — re-run optimize"
            )

    def _checked_view(self, chunk_index: int, data: bytes | memoryview | mmap.mmap, keep: bool) -> ChunkView:
        info = self.index.chunks[chunk_index]
        if self.encryption_level is None:  # else checked before decryption
            self._check_length(chunk_index, data)
        view: ChunkView
        if self.parquet is not None:
            view = ParquetChunk(data, columns=self.parquet.columns)
        elif self.tokens is None:
            view = read_chunk_view(data)  # an ArrowChunk when LitData stored the samples as Arrow
        else:
            view = ChunkView(data)
        if view.num_items != info.chunk_size:
            raise FormatError(f"{info.filename} holds {view.num_items} items but index.json records {info.chunk_size}")
        if self.tokens is not None:
            view = self.tokens.view(chunk_index, view)
        if keep:
            self._remember(chunk_index, view)
        return view

    def _remember(self, chunk_index: int, view: ChunkView) -> None:
        """Keep recently read chunks (LRU, at most ``max_decoded_bytes``, always the newest one), so
        random access into compressed chunks decompresses each chunk once while it stays hot."""
        self._chunks[chunk_index] = view
        self._chunks_bytes += len(view.data)
        while len(self._chunks) > 1 and self._chunks_bytes > self.max_decoded_bytes:
            _, old = self._chunks.popitem(last=False)
            self._chunks_bytes -= len(old.data)

    async def read_item_bytes(self, chunk_index: int, item: int) -> bytes | memoryview:
        """The bytes of one item. A remote uncompressed chunk is read with one range read of the item's
        bytes, once this process holds the chunk's offset table (fetched on the chunk's first item read:
        see ``read/source/_headers.py``), instead of the whole chunk; a local one with one ``pread`` pair."""
        config = self.index.config
        if (
            (config is not None and config.compression)
            or chunk_index in self._chunks
            or self.parquet is not None
            or self.encryption_level == "chunk"
        ):
            return (await self.read_chunk(chunk_index, keep=True)).item(item)
        raw = await self._read_raw_item(chunk_index, item)
        if self.encryption_level is None:
            return raw
        where = f"{self.store.url}/{self.index.chunks[chunk_index].filename} item {item}"
        return decrypt_item(self.encryption, raw, where)

    async def _read_raw_item(self, chunk_index: int, item: int) -> bytes | memoryview:
        info = self.index.chunks[chunk_index]
        if self.tokens is not None:
            begin, length = self.tokens.block_span(chunk_index, item)
            block = await self.store.get_range(info.filename, begin, length)
            if len(block) != length:
                raise FormatError(f"{info.filename} ends inside block {item}; the file is incomplete — re-run optimize")
            return block
        if not 0 <= item < info.chunk_size:
            raise FormatError(f"item {item} is outside {info.filename} ({info.chunk_size} items)")
        path = local_path(self.store, info.filename)
        if path is not None:  # a local file: both reads in one thread call
            if has_checksum(info):  # the whole file, once per process
                await check_local_file(path, info, persistent=self.cache is None)
            return await read_span_at(path, item_span_offset(item))
        return await self.offset_tables.read_item(self.store, info, item)  # one range read once the table is held

    def decode_in(self, view: ChunkView, item: int) -> Any:
        """Decode item ``item`` (chunk-local) of ``view``: an Arrow chunk's row, else the item bytes."""
        if isinstance(view, ArrowChunk):
            return view.item(item)
        return self.decoder.decode(view.item(item))

    async def read_sample(self, chunk_index: int, item: int) -> Any:
        """Decode one item (``ds[i]``). Uncompressed chunks: one range read of the item's bytes; an
        empty item (an Arrow chunk's: its samples live in the Arrow payload at the chunk's end) or a
        compressed chunk: the whole chunk, kept for the next reads."""
        config = self.index.config
        if (config is not None and config.compression) or chunk_index in self._chunks or self.parquet is not None:
            return self.decode_in(await self.read_chunk(chunk_index, keep=True), item)
        raw = await self.read_item_bytes(chunk_index, item)
        if len(raw) == 0 and self.tokens is None:
            return self.decode_in(await self.read_chunk(chunk_index, keep=True), item)
        return self.decoder.decode(raw)

    async def get_item(self, index: int) -> Any:
        """Decode the item at global ``index``."""
        chunk, item = self.locate(index)
        return await self.read_sample(chunk, item)
