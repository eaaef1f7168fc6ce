"""``dataset_update``: keyed in-place replaces (``build_keys_index``, which back-fills the ``keys/`` sidecar,
lives in :mod:`._keys_index`).

An update never rewrites a file a reader may be using. Every chunk that holds an updated sample is
written whole under a new name, ``chunk-{rank}-{n}-u{token}[.{compression}].bin`` (the name LitData
0.2.76 uses for the same purpose), and only then is ``index.json`` replaced in one atomic put that points
at the new chunks: that put is the commit. A crash before it leaves the old dataset (plus unlisted new
chunk files, which no reader looks at), after it the new one; never a mix. The replaced chunk files are
kept by default, so a reader that opened the dataset before the update still reads its old, consistent
view, and expire with the dataset's retention like every superseded version's files (``docs/versions.md``);
``delete_replaced=True`` retires every earlier version at the commit and removes the files only they named.

One writer at a time: a commit holds the dataset's writer lease (``write/_writer_lock.py``), as ``optimize``
does, and replaces ``index.json`` only while the lease is its own and ``index.json`` is the version it read;
a second writer (another update, an ``optimize`` in ``append`` mode, ...) fails with ``OutputLockedError``
naming the first, and a commit that fails removes the chunk files it wrote.
"""

from __future__ import annotations

import contextlib
import re
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from .._core._bridge import run_sync
from .._core._errors import (
    ConfigurationError,
    DatasetNotFoundError,
    FormatError,
    KeyNotFoundError,
    ObjectNotFoundError,
)
from ..format._checksum import CHECKSUM_KEY, chunk_digest, expected_digest
from ..format._compression import compress, decompress
from ..format._index import INDEX_FILENAME, ChunkInfo, Index
from ..format._keys import KEYS_DIR, normalize_key
from ..format._loaders import SampleDecoder, SampleEncoder
from ..format._version_log import Retention
from ..format.arrow._chunk import ArrowChunk, read_chunk_view
from ..format.arrow._write import ArrowEncoder, pack_arrow_chunk
from ..storage._files import local_path
from ..storage._resolver import store_for
from ._chunk_pack import pack_and_compress
from ._keys import has_sidecar, load_sidecar
from ._writer_lock import WriterLock

if TYPE_CHECKING:
    import os
    from collections.abc import AsyncIterator, Mapping
    from types import TracebackType

    from ..format._chunk import ChunkView
    from ..format._serializers import Serializer
    from ..storage._resolver import Dir
    from ..storage._store import Store

__all__ = ["DatasetUpdate", "dataset_update"]

_NAME_RE = re.compile(r"^chunk-(\d+)-(\d+)(?:-u\d+)?((?:\.[A-Za-z0-9:]+)?)\.bin$")


def _open(input_dir: str | os.PathLike[str] | Dir | Store, storage_options: Mapping[str, Any] | None) -> Store:
    return store_for(input_dir, storage_options)


async def _read_index(store: Store) -> Index:
    try:
        return Index.from_json(await store.get(INDEX_FILENAME), source=f"{store.url}/{INDEX_FILENAME}")
    except ObjectNotFoundError:
        root = local_path(store, "")
        if root is not None and not root.is_dir():
            raise DatasetNotFoundError(f"the dataset directory {root} does not exist; check the path") from None
        raise DatasetNotFoundError(f"{store.url} holds no index.json; is it the output_dir of optimize()?") from None


def _check_plain(index: Index, store: Store, what: str) -> None:
    config = index.config
    if config is None or not index.chunks:
        raise DatasetNotFoundError(f"the dataset in {store.url} has no chunks")
    if config.encryption is not None or (config.item_loader not in (None, "PyTreeLoader")):
        raise ConfigurationError(
            f"{what} works on PyTreeLoader datasets without encryption; {store.url} has "
            f"item_loader={config.item_loader!r}, encryption={'set' if config.encryption else None}"
        )


async def _chunk_items(store: Store, index: Index, chunk: ChunkInfo) -> ChunkView:
    assert index.config is not None
    data: bytes | memoryview = await store.get(chunk.filename)
    if index.config.compression:
        data = decompress(data, index.config.compression)
    view = read_chunk_view(data)  # an ArrowChunk for LitData's Arrow rows (optimize's default for JSON-like dicts)
    if view.num_items != chunk.chunk_size:
        raise FormatError(f"{chunk.filename} holds {view.num_items} items, index.json says {chunk.chunk_size}")
    return view


async def iter_samples_of(
    store: Store, index: Index, serializers: Mapping[str, Serializer] | None = None
) -> AsyncIterator[Any]:
    """Every sample of the dataset, in index order (whole chunks, one at a time)."""
    assert index.config is not None
    decoder = SampleDecoder(index.config, serializers)
    for chunk in index.chunks:
        view = await _chunk_items(store, index, chunk)
        rows = isinstance(view, ArrowChunk)
        for i in range(view.num_items):
            yield view.item(i) if rows else decoder.decode(view.item(i))


def _arrow_chunk(view: ArrowChunk, updates: dict[int, Any], index: Index) -> tuple[bytes, int]:
    """The chunk ``view`` with the rows at ``updates``' positions replaced, as Arrow rows again: stored bytes and
    ``chunk_bytes``.

    Raises:
        FormatError: a new sample cannot share an Arrow table with the chunk's other rows (a field's kind).
    """
    assert index.config is not None
    rows = view.rows(list(range(view.num_items)))
    check = ArrowEncoder()
    for i in range(len(rows)):
        rows[i] = updates.get(i, rows[i])
        check.add(rows[i])
    payload = pack_arrow_chunk(rows, index.config.extra.get("ipc_compression"))
    compression = index.config.compression  # LitData may compress such a chunk as a whole file
    return (compress(payload, compression) if compression else payload), len(payload)


def _updated_name(filename: str, taken: set[str]) -> str:
    match = _NAME_RE.match(filename)
    if match is None:
        raise FormatError(f"cannot derive an updated chunk name from {filename!r} (not chunk-R-N[.comp].bin)")
    rank, number, suffix = match.groups()
    token = time.time_ns() // 1000 % 1_000_000_000
    while True:
        name = f"chunk-{rank}-{number}-u{token}{suffix}.bin"
        if name not in taken:
            taken.add(name)
            return name
        token += 1


class DatasetUpdate:
    """A keyed update session (LitData 0.2.76's ``DatasetUpdate``): stage with ``update[key] = sample``,
    then :meth:`commit`. Leaving the ``with`` block without ``commit()`` drops what was staged.

    Args: see :func:`dataset_update`.
    """

    def __init__(
        self,
        input_dir: str | os.PathLike[str] | Dir | Store,
        *,
        storage_options: Mapping[str, Any] | None = None,
        serializers: Mapping[str, Serializer] | None = None,
        delete_replaced: bool = False,
    ) -> None:
        self._store = _open(input_dir, storage_options)
        self._serializers = serializers
        self._delete_replaced = delete_replaced
        self._pending: dict[str | int, Any] = {}
        self._committed = False
        index = run_sync(_read_index, self._store)
        _check_plain(index, self._store, "dataset_update")
        if not run_sync(has_sidecar, self._store):
            raise DatasetNotFoundError(
                f"the dataset in {self._store.url} has no {KEYS_DIR}/ sidecar; re-run optimize(..., key_fn=...) "
                "or call build_keys_index(input_dir, key_fn) first"
            )

    def __enter__(self) -> DatasetUpdate:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._pending.clear()

    def __setitem__(self, key: str | int, sample: Any) -> None:
        self.replace(key, sample)

    def replace(self, key: str | int, sample: Any) -> None:
        """Stage ``sample`` as the new sample of ``key`` (checked on :meth:`commit`).

        Raises:
            RuntimeError: the session was committed already.
            ConfigurationError: ``key`` is neither str nor int.
        """
        if self._committed:
            raise RuntimeError("this dataset_update session is committed; open a new one for more changes")
        self._pending[normalize_key(key)] = sample

    def commit(self) -> None:
        """Write the staged samples; afterwards the session takes no more changes.

        Raises:
            KeyNotFoundError: a staged key is not in the dataset (nothing is written).
            FormatError: a new sample has another structure or leaf types than the dataset's.
            OutputLockedError: (a ``RuntimeError``) another run writes the dataset (named), or ``index.json``
                changed while this commit was written; nothing is committed and the new chunk files are removed.
            RuntimeError: already committed.
        """
        if self._committed:
            raise RuntimeError("this dataset_update session is committed already")
        if self._pending:
            run_sync(self._commit)
        self._pending.clear()
        self._committed = True

    async def _commit(self) -> None:
        lock = await WriterLock(self._store, "dataset_update").aacquire()
        try:
            await anyio.to_thread.run_sync(lock.note_index)  # the commit needs index.json at this version
            await self._write(lock)
        finally:
            await lock.arelease()

    async def _write(self, lock: WriterLock) -> None:
        store = self._store
        index = await _read_index(store)
        _check_plain(index, store, "dataset_update")
        assert index.config is not None
        loaded = await load_sidecar(store, index)
        if loaded is None:
            raise DatasetNotFoundError(f"the dataset in {store.url} has no {KEYS_DIR}/ sidecar")
        table = loaded[0]
        starts = [0]
        for info in index.chunks:
            starts.append(starts[-1] + info.chunk_size)
        by_chunk: dict[int, dict[int, tuple[bytes, Any]]] = {}
        encoder = SampleEncoder(self._serializers)
        missing = []
        for key, sample in self._pending.items():
            position = table.find(key)
            if position is None:
                missing.append(key)
                continue
            chunk = next(c for c in range(len(index.chunks)) if starts[c] <= position < starts[c + 1])
            by_chunk.setdefault(chunk, {})[position - starts[chunk]] = (encoder.encode(sample), sample)
        if missing:
            shown = ", ".join(map(repr, missing[:5])) + (", ..." if len(missing) > 5 else "")
            raise KeyNotFoundError(
                f"dataset_update: key(s) {shown} are not in the dataset {store.url}; nothing was written"
            )
        if (encoder.data_format, encoder.data_spec) != (index.config.data_format, index.config.data_spec):
            raise FormatError(
                f"the new samples have data_format {list(encoder.data_format)} / structure {encoder.data_spec}, the "
                f"dataset {list(index.config.data_format)} / {index.config.data_spec}; keep the same keys and types"
            )
        chunks = list(index.chunks)
        taken = {c.filename for c in index.chunks} | {m.path for m in await store.list() if "/" not in m.path}
        written: list[str] = []
        try:
            for position, updates in sorted(by_chunk.items()):
                old = chunks[position]
                view = await _chunk_items(store, index, old)
                if isinstance(view, ArrowChunk):  # rewritten as Arrow rows: checked as optimize checks them
                    payload, size = _arrow_chunk(view, {i: sample for i, (_, sample) in updates.items()}, index)
                else:
                    items = [bytes(updates[i][0] if i in updates else view.item(i)) for i in range(view.num_items)]
                    payload, size = pack_and_compress(items, index.config.compression)
                extra = dict(old.extra)
                digest = expected_digest(old)
                if digest is not None:
                    extra[CHECKSUM_KEY] = chunk_digest([payload], digest.split(":", 1)[0])
                name = _updated_name(old.filename, taken)
                written.append(name)
                await store.put(name, payload)
                chunks[position] = replace(old, filename=name, chunk_bytes=size, extra=extra)
            new_index = replace(index, chunks=tuple(chunks)).stamped()
            # the commit point: only while the lease is ours and index.json is the version read above;
            # delete_replaced retires every earlier version at once, so no version names a removed file
            retire = Retention(keep=1, grace=0.0) if self._delete_replaced else None
            await lock.acommit_index(new_index.to_json().encode(), retire)
        except BaseException:
            with anyio.CancelScope(shield=True):
                for name in written:
                    with contextlib.suppress(ObjectNotFoundError):
                        await store.delete(name)
            raise


def dataset_update(
    input_dir: str | os.PathLike[str] | Dir | Store,
    updates: Mapping[str | int, Any] | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
    serializers: Mapping[str, Serializer] | None = None,
    delete_replaced: bool = False,
) -> DatasetUpdate:
    """Open a keyed update session on an optimized dataset (LitData 0.2.76's ``dataset_update``)::

        with dataset_update("optimized_data") as update:
            update["sample-id"] = {"x": 1, "y": 2}
            update.commit()

    The dataset needs a ``keys/`` sidecar (``optimize(..., key_fn=...)`` or :func:`build_keys_index`).
    Unlike LitData's (local only), any location works: local, ``s3://``, ``gs://``, ``azure://``.

    Args:
        input_dir: The dataset (path, URL, ``Dir`` or ``Store``).
        updates: litstream's shortcut: ``{key: sample}`` staged and committed at once.
        storage_options: Credentials for object stores.
        serializers: Extra serializers by registry key (for samples that need them).
        delete_replaced: Retire every earlier version at the commit (retention ``keep=1, grace=0`` for this
            commit) and delete the files only they named, the replaced chunks among them. Default ``False``:
            they stay for the dataset's retention, so readers that opened the dataset before keep reading a
            consistent old view and ``version=`` still opens them.

    Returns:
        The session (already committed when ``updates`` was given).

    Raises:
        DatasetNotFoundError: no ``index.json`` or no ``keys/`` sidecar.
        ConfigurationError: an encrypted or TokensLoader dataset.
    """
    session = DatasetUpdate(
        input_dir, storage_options=storage_options, serializers=serializers, delete_replaced=delete_replaced
    )
    if updates is not None:
        for key, sample in updates.items():
            session[key] = sample
        session.commit()
    return session
