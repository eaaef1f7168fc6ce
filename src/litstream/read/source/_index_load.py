"""Reading a dataset's index: a committed version's (``index.json``, or one from the version log), an interrupted
run's partial indexes merged on request (``version="partial"``), or a local index file."""

from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING

import anyio

from ..._core._bridge import run_sync
from ..._core._errors import DatasetNotFoundError, ObjectNotFoundError
from ...format._index import INDEX_FILENAME, Index, is_partial_index_name, merge_partial_indexes
from ...format._version_log import index_digest
from ...format.mds._index import read_index
from ...storage._base import mapped_errors
from ...storage._files import local_path
from ...storage._listing import list_retrying
from ...storage._safe_files import read_regular
from ._versions import VersionLog

if TYPE_CHECKING:
    from ...storage._store import Store
    from ._versions import VersionRef

__all__ = ["load_index", "load_local_index", "load_versioned_index", "load_versioned_index_now", "read_index_bytes"]


async def load_index(store: Store, ref: VersionRef | None = None) -> Index:
    """The index of the version ``ref`` names (``None``: the latest committed one, ``index.json``).

    A run that died before its commit leaves partial indexes (``{rank}.index.json``) and no new ``index.json``:
    they are never served as the dataset, except with ``version="partial"`` (``VersionRef(partial=True)``),
    which merges them in memory and says so in a warning.

    Raises:
        DatasetNotFoundError: no ``index.json`` (naming an interrupted run's partial indexes, if any).
        VersionNotFoundError: the version asked for, or pinned, is not in the version log.
        FormatError: the index is malformed.
    """
    return (await load_versioned_index(store, ref))[0]


async def load_versioned_index(
    store: Store, ref: VersionRef | None = None, *, known: bytes | None = None
) -> tuple[Index, str | None]:
    """:func:`load_index`, with the digest of the index's exact bytes (``None`` for merged partial indexes);
    ``known``: ``index.json``'s bytes read earlier in this process, used instead of a read when ``ref`` pins them."""
    where = f"{store.url}/{INDEX_FILENAME}"
    if ref is not None and ref.partial:
        return await _merge_partials(store), None
    if known is not None and ref is not None and index_digest(known) == ref.digest:
        return read_index(known, where), ref.digest
    if ref is None or ref.digest is not None:
        try:
            path = local_path(store, INDEX_FILENAME)
            if path is not None:  # one small local file: read on the loop, no thread hop
                raw = read_index_bytes(store)
            else:
                raw = await store.get(INDEX_FILENAME)
        except ObjectNotFoundError:
            if ref is None:
                raise await _not_found(store) from None
        else:
            digest = index_digest(raw)
            if ref is None or digest == ref.digest:
                return read_index(raw, where), digest
    assert ref is not None
    log = VersionLog(store)
    if local_path(store, "") is not None:  # a few small local files, read like index.json above: no thread hop
        raw, record = log.resolve(ref)
    else:
        raw, record = await anyio.to_thread.run_sync(log.resolve, ref)
    return read_index(raw, f"{store.url} version {record.number}"), record.digest


def load_versioned_index_now(store: Store, ref: VersionRef | None = None) -> tuple[Index, str | None] | None:
    """:func:`load_versioned_index` of a dataset in local files, read from this thread without an event loop;
    ``None`` when that needs one (not local files, no ``index.json``, or partial indexes asked for): the caller
    then loads it on a loop, which also reports what is missing."""
    if (ref is not None and ref.partial) or local_path(store, INDEX_FILENAME) is None:
        return None
    try:
        raw = read_index_bytes(store)
    except ObjectNotFoundError:
        return None
    digest = index_digest(raw)
    if ref is None or digest == ref.digest:
        return read_index(raw, f"{store.url}/{INDEX_FILENAME}"), digest
    raw, record = VersionLog(store).resolve(ref)
    return read_index(raw, f"{store.url} version {record.number}"), record.digest


def read_index_bytes(store: Store) -> bytes:
    """``index.json``'s bytes, read now from this thread (a local file in place, else one GET on a fresh loop).

    Raises:
        ObjectNotFoundError: there is none.
    """
    path = local_path(store, INDEX_FILENAME)
    if path is None:
        return run_sync(store.get, INDEX_FILENAME)
    with mapped_errors("get", str(path)):
        return read_regular(path)  # a regular file inside the dataset, never a FIFO


async def _partial_names(store: Store) -> list[str]:
    return [m.path for m in await list_retrying(store) if "/" not in m.path and is_partial_index_name(m.path)]


async def _not_found(store: Store) -> DatasetNotFoundError:
    """No ``index.json``: say so, naming an interrupted run's partial indexes when there are some."""
    names = await _partial_names(store)
    if not names:
        return DatasetNotFoundError(
            f"{store.url} holds no index.json; is it the output_dir of optimize()? "
            "Run optimize(fn, inputs, output_dir=...) first"
        )
    shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
    return DatasetNotFoundError(
        f"{store.url} holds no committed dataset: an interrupted run left partial indexes ({shown}) but never "
        "committed index.json. Run the job again (it cleans up and starts over, or resumes with "
        "use_checkpoint=True), commit what was written with complete_dataset(), or read the partial data anyway "
        "with version='partial'"
    )


async def _merge_partials(store: Store) -> Index:
    names = await _partial_names(store)
    if not names:
        raise DatasetNotFoundError(f"version='partial': {store.url} holds no partial indexes ({{rank}}.index.json)")
    partials = [(n, Index.from_json(await store.get(n), source=n)) for n in names]
    warnings.warn(
        f"{store.url}: serving the partial indexes of an uncommitted run ({len(names)} files), as version='partial' "
        "asks: this is not a committed version, and may lack samples the run never finished",
        UserWarning,
        stacklevel=2,
    )
    return merge_partial_indexes(partials)


async def load_local_index(index_path: str | os.PathLike[str]) -> Index:
    """Read an index kept apart from its data: ``index_path`` is an ``index.json`` or a directory holding one.

    Raises:
        FileNotFoundError: nothing there; the message names the path. FormatError: a malformed index.
    """
    path = await anyio.Path(index_path).expanduser()
    if await path.is_dir():
        path = path / INDEX_FILENAME
    try:
        text = await path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        raise FileNotFoundError(
            f"index_path={os.fspath(index_path)!r}: no index file at {path}; pass the index.json that "
            "index_parquet_dataset or optimize wrote (or the directory holding it)"
        ) from None
    return read_index(text, str(path))
