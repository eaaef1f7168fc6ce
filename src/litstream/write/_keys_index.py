"""``build_keys_index``: scan a dataset with ``key_fn`` and back-fill its ``keys/`` sidecar.

One writer at a time: the run holds the output's writer lease (``write/_writer_lock.py``) from before
it reads the dataset until it has written the sidecar, as ``optimize``, ``merge_datasets`` and
``dataset_update`` do. A second run on the same output (another ``build_keys_index``, an ``optimize``, a
merge, an update) fails at once with ``OutputLockedError`` naming the first, and the first run refuses
to start while another writes there.

Nothing half-written: the sidecar's files keep their fixed names (``keys/shard-{k:05d}.parquet``, which
LitData reads too), so they are replaced in place. Before the first put the run keeps a copy of the
sidecar files already there (the old sidecar, in memory) and, if anything fails before the commit (a
failed put, ``index.json`` changed by a writer that ignores the lease, an interrupt), it puts them back
and deletes the shards it added. The commit is the guarded put of ``index.json`` with the new ``keys``
section (only while the lease is this run's and ``index.json`` is the version read under it); an output
without ``index.json`` commits by renewing the lease. A run whose lease another run took over restores
nothing: the output is that run's now.
"""

from __future__ import annotations

import contextlib
import functools
import os
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from .._core._bridge import run_sync
from .._core._errors import ConfigurationError, DatasetNotFoundError, ObjectNotFoundError, OutputNotEmptyError
from ..format._index import INDEX_FILENAME
from ..format._keys import (
    KEYS_DIR,
    LEGACY_KEYS_NAME,
    normalize_key,
    section_of,
    shard_name,
    sorted_table,
    table_from_values,
)
from ..storage._listing import list_retrying
from ._keys import has_sidecar, write_sidecar
from ._update import _check_plain, _open, _read_index, iter_samples_of
from ._writer_lock import WriterLock

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from ..format._serializers import Serializer
    from ..storage._resolver import Dir
    from ..storage._store import Store

__all__ = ["build_keys_index"]


def _is_shard(name: str) -> bool:
    return name.startswith(f"{KEYS_DIR}/shard-") and name.endswith(".parquet") and name.count("/") == 1


async def _sidecar_files(out: Store) -> dict[str, bytes]:
    """The sidecar files in ``out`` now (``keys/shard-*.parquet`` and LitData's older ``keys.parquet``), by name."""
    names = [meta.path for meta in await list_retrying(out, f"{KEYS_DIR}/") if _is_shard(meta.path)]
    names.append(LEGACY_KEYS_NAME)
    saved: dict[str, bytes] = {}
    for name in names:
        with contextlib.suppress(ObjectNotFoundError):
            saved[name] = bytes(await out.get(name))
    return saved


async def _restore(out: Store, saved: dict[str, bytes], added: list[str]) -> None:
    """Put the sidecar back as :func:`_sidecar_files` found it (best effort: the first error is raised)."""
    for name in added:
        if name not in saved:
            with contextlib.suppress(ObjectNotFoundError):
                await out.delete(name)
    for name, data in saved.items():
        await out.put(name, data)


async def _under_lease(store: Store, out: Store, build: Callable[[WriterLock], Awaitable[None]]) -> None:
    """Run ``build`` holding ``out``'s writer lease, once ``store`` is known to hold a plain dataset."""
    _check_plain(await _read_index(store), store, "build_keys_index")  # a missing dataset fails before the lease
    lock = await WriterLock(out, "build_keys_index").aacquire()
    try:
        await anyio.to_thread.run_sync(lock.note_index)
        await build(lock)
    finally:
        await lock.arelease()


async def _build_locked(
    store: Store,
    out: Store,
    key_fn: Callable[[Any], Any],
    overwrite: bool,
    num_shards: int,
    verbose: bool,
    serializers: Mapping[str, Serializer] | None,
    lock: WriterLock,
) -> None:
    from tqdm.auto import tqdm

    index = await _read_index(store)  # again, under the lease
    _check_plain(index, store, "build_keys_index")
    if await has_sidecar(out) and not overwrite:
        raise OutputNotEmptyError(f"{out.url} already has a {KEYS_DIR}/ sidecar; pass overwrite=True to replace it")
    keys: list[str | int] = []
    with tqdm(total=index.num_items, desc="Building keys index", unit="sample", disable=not verbose) as bar:
        async for sample in iter_samples_of(store, index, serializers):
            keys.append(normalize_key(key_fn(sample), argument=f"key_fn(sample {len(keys)})"))
            bar.update(1)
    names = [f"sample {i}" for i in range(len(keys))]
    array, indices = table_from_values(keys, source=store.url, inputs=names)
    table = sorted_table(array, indices, source=store.url, inputs=names)
    try:
        out_index = await _read_index(out)
    except DatasetNotFoundError:
        out_index = None
    if out_index is not None:
        section_of(out_index.extra, source=f"{out.url}/{INDEX_FILENAME}")  # a malformed section fails before a put
    saved = await _sidecar_files(out)
    added = [shard_name(s) for s in range(num_shards)]
    try:
        section = await write_sidecar(out, table, index, num_shards)
        for name in saved:  # shards of a previous sidecar with more shards
            if _is_shard(name) and name not in added:
                await out.delete(name)
        if out_index is not None:  # the commit point (see the module docstring)
            await lock.acommit_index(replace(out_index, extra={**out_index.extra, "keys": section}).to_json().encode())
        else:
            await anyio.to_thread.run_sync(lock.confirm)
    except BaseException:
        if lock.lost is None:
            with anyio.CancelScope(shield=True):
                await _restore(out, saved, added)
        raise


def build_keys_index(
    input_dir: str | os.PathLike[str] | Dir | Store,
    key_fn: Callable[[Any], Any],
    *,
    output_dir: str | os.PathLike[str] | Dir | Store | None = None,
    overwrite: bool = False,
    verbose: bool = True,
    num_shards: int = 1,
    storage_options: Mapping[str, Any] | None = None,
    serializers: Mapping[str, Serializer] | None = None,
) -> str:
    """Scan a dataset with ``key_fn`` and write its ``keys/`` sidecar (LitData 0.2.76's ``build_keys_index``).

    For datasets written without ``optimize(..., key_fn=...)``. Reads every chunk once, in index order.
    Holds the output's writer lease while it runs (one writer at a time, see :mod:`._keys_index`); a
    failure leaves the previous sidecar as it was.

    Args:
        input_dir: The dataset (path, URL, ``Dir`` or ``Store``).
        key_fn: ``key_fn(sample) -> str | int``; keys must be unique and of one type.
        output_dir: Write the sidecar there instead (its ``index.json``, if any, gets the ``keys`` section).
        overwrite: Replace an existing sidecar. Default ``False``.
        verbose: Show a tqdm bar.
        num_shards: Shards (``keys/shard-{k:05d}.parquet``, a key in shard ``blake2b(str(key)) % n``). Default 1.
        storage_options: Credentials for object stores.
        serializers: Extra serializers for decoding.

    Returns:
        The ``keys`` directory (path or URL).

    Raises:
        OutputNotEmptyError: a sidecar exists and ``overwrite`` is ``False``.
        OutputLockedError: another run (``optimize``, ``build_keys_index``, ...) writes the output (named),
            or ``index.json`` was changed meanwhile; the previous sidecar is left as it was.
        DuplicateKeyError: two samples have the same key (names both).
        ConfigurationError: a bad argument or key.
    """
    if isinstance(num_shards, bool) or not isinstance(num_shards, int) or not 1 <= num_shards <= 4096:
        raise ConfigurationError(f"num_shards={num_shards!r} must be an int in [1, 4096]")
    store = _open(input_dir, storage_options)
    out = store if output_dir is None else _open(output_dir, storage_options)
    build = functools.partial(_build_locked, store, out, key_fn, overwrite, num_shards, verbose, serializers)
    run_sync(_under_lease, store, out, build)
    return f"{out.url.rstrip('/')}/{KEYS_DIR}" if "://" in out.url else os.path.join(out.url, KEYS_DIR)
