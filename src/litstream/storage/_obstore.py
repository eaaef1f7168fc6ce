"""Object stores (S3, GCS, Azure, and obstore's memory/local stores) through obstore.

obstore's ``*_async`` calls need a running asyncio loop and fail under trio, so every call is the sync
one run in ``anyio.to_thread.run_sync`` with this store's ``CapacityLimiter``: that one function,
:meth:`ObstoreStore._call`, is the whole asyncio/trio bridge. Reads may be abandoned when cancelled (the
thread finishes in the background and its result is dropped), so a hedged read's loser or a cancelled
stream does not wait; writes and deletes are waited for.

obstore's runtime does not survive fork (see :mod:`._obstore_fork`). A store built from an
:class:`ObstoreSpec` therefore holds configuration only: it pickles as that configuration and builds its
obstore client lazily, once in each process that uses it (a forked child builds its own, through a
private copy of obstore's native module when the parent had used obstore). A store that wraps a ready
obstore store cannot be rebuilt: it refuses, with :class:`~litstream.StorageError` instead of a hang, to
run in a process forked after it was made or after the parent used obstore.
"""

from __future__ import annotations

import dataclasses
import os
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.to_thread
import sniffio

from .._core._errors import ConfigurationError, StorageError
from ._base import ObjectMeta, TransferConfig, loop_limiter, mapped_errors, put_size
from ._faults import explain_failure
from ._keys import check_key
from ._obstore_fork import ProcessClient, note_used
from ._obstore_stream import stream_into_buffer, stream_into_file

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from types import ModuleType

    from obstore import GetOptions

    from ._base import PutData
    from ._obstore_spec import ObstoreSpec

__all__ = ["ObstoreStore"]

T = TypeVar("T")


class ObstoreStore:
    """Any obstore store as a :class:`~litstream.Store`.

    Pass either a ready obstore store (``ObstoreStore(MemoryStore())``), or an :class:`ObstoreSpec` (what
    :func:`~litstream.storage._resolver.store_for` builds for ``s3://``, ``gs://`` and ``azure://``).

    Args:
        store: An ``obstore.store.*`` instance (``MemoryStore()``, ``LocalStore(root)``, ``S3Store``…).
        url: A description of the root for messages (default: the spec's URL, or the store's repr).
        max_threads: Concurrent obstore calls (default 16).
        spec: Build the client from this configuration, lazily, in the process that uses it.
        transfer: Multipart sizes for ``store`` (a spec carries its own). Default ``TransferConfig()``.

    Raises:
        ConfigurationError: neither or both of ``store`` and ``spec`` are given.
    """

    def __init__(
        self,
        store: Any = None,
        *,
        url: str | None = None,
        max_threads: int = 16,
        spec: ObstoreSpec | None = None,
        transfer: TransferConfig | None = None,
    ) -> None:
        if (store is None) == (spec is None):
            raise ConfigurationError("ObstoreStore needs exactly one of store=<obstore store> or spec=ObstoreSpec(...)")
        self._spec = spec
        self._transfer = spec.transfer if spec is not None else (transfer or TransferConfig())
        self._url = url or (spec.url if spec is not None else repr(store))
        self._clients = ProcessClient(store, spec, self._url)  # the client per process (storage/_obstore_fork.py)
        self._max_threads = max_threads
        self._limiter_obj: tuple[object, anyio.CapacityLimiter] | None = None
        self.native_async = False  # get() through obstore's asyncio API under asyncio (see _get_native)

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_limiter_obj": None}  # configuration only: clients are per process

    # __repr__, url and transfer read like HTTPStore's (and LocalFileStore's): one-line accessors of each store's
    # own fields, kept per class so that each repr names its class and each store pickles its own state.
    def __repr__(self) -> str:
        return f"ObstoreStore({self._url!r})"

    @property
    def url(self) -> str:
        return self._url

    @property
    def transfer(self) -> TransferConfig:
        """The retry and multipart settings (``storage_options``' retry keys); listings retry by them too."""
        return self._transfer

    def without_retries(self) -> ObstoreStore:
        """This store with obstore's own retries off, for a caller that retries in its own loop (and so sees
        every throttled or failed request: the raw fetcher's adaptive limit, ``read/raw/_fetch.py``).

        Timeouts, credentials and the rest of the configuration are this store's; :attr:`transfer` still
        gives the retry budget the caller should spend. A wrapped obstore store (no spec) cannot be
        rebuilt: it is returned as it is.
        """
        if self._spec is None:
            return self
        retry_config = {**self._spec.retry_config, "max_retries": 0}
        transfer = dataclasses.replace(self._transfer, max_retries=0)
        spec = dataclasses.replace(self._spec, transfer=transfer, retry_config=retry_config)
        quiet = ObstoreStore(spec=spec, url=self._url, max_threads=self._max_threads)
        quiet.native_async = self.native_async
        return quiet

    @property
    def spec(self) -> ObstoreSpec | None:
        """The configuration this store builds its client from (``None`` for a wrapped obstore store)."""
        return self._spec

    def _client(self) -> tuple[ModuleType, Any]:
        """This process's obstore native module and client (``storage/_obstore_fork.py``'s ``ProcessClient``)."""
        return self._clients.get()

    async def _call(
        self, operation: str, path: str, fn: Callable[..., T], *args: Any, abandon_on_cancel: bool = True
    ) -> T:
        """Run one synchronous obstore call in a worker thread (the asyncio/trio bridge).

        Args:
            operation: The name used in error messages.
            path: The key, for error messages.
            fn: Called as ``fn(obstore_native_module, obstore_store, *args)`` in a worker thread.
            abandon_on_cancel: When the caller is cancelled, return at once and let the thread finish in
                the background (reads); ``False`` waits for the call to finish (writes, deletes).
        """
        if operation != "list":
            check_key(path, self._url)  # no key outside the prefix, whatever the caller
        where = f"{self._url}/{path}"
        started: list[float] = []  # when the call began in its thread (not counting the wait for one)

        def timed(module: ModuleType, client: Any) -> T:
            started.append(time.monotonic())
            return fn(module, client, *args)

        try:
            with mapped_errors(operation, where):
                module, client = self._client()
                self._limiter_obj = loop_limiter(self._limiter_obj, self._max_threads)
                note_used(module)
                return await anyio.to_thread.run_sync(
                    partial(timed, module, client), limiter=self._limiter_obj[1], abandon_on_cancel=abandon_on_cancel
                )
        except StorageError as exc:
            clearer = self._explained(exc, operation, where, started[0]) if started else None
            if clearer is None:
                raise
            raise clearer from exc.__cause__

    def _explained(self, exc: StorageError, operation: str, where: str, started: float) -> StorageError | None:
        """:func:`~litstream.storage._faults.explain_failure` of an obstore call that began at ``started``."""
        if exc.__cause__ is None:
            return None
        spec, elapsed = self._spec, time.monotonic() - started
        kind, config = (spec.kind, spec.config) if spec is not None else ("", {})
        return explain_failure(exc, kind=kind, config=config, operation=operation, where=where, elapsed=elapsed)

    async def get(self, path: str) -> bytes:
        """See :meth:`litstream.Store.get`."""
        if self.native_async and sniffio.current_async_library() == "asyncio":
            return await self._get_native(path)

        def fetch(ob: ModuleType, store: Any, key: str) -> bytes:
            return bytes(ob.get(store, key).bytes())

        return await self._call("get", path, fetch, path)

    async def _get_native(self, path: str) -> bytes:
        """``get`` through obstore's own asyncio client, no thread per request (asyncio only: trio uses threads).

        Used when ``native_async`` is set (``StreamingRawDataset``: many small GETs).
        """
        where = f"{self._url}/{path}"
        started = time.monotonic()
        try:
            with mapped_errors("get", where):
                module, client = self._client()
                note_used(module)
                answer = await module.get_async(client, path)
                return bytes(await answer.bytes_async())
        except StorageError as exc:
            clearer = self._explained(exc, "get", where, started)
            if clearer is None:
                raise
            raise clearer from exc.__cause__

    async def get_range(self, path: str, start: int, length: int) -> bytes:
        """See :meth:`litstream.Store.get_range`; a ``start`` past the end raises StorageError."""
        if length <= 0:
            return b""

        def fetch(ob: ModuleType, store: Any, key: str) -> bytes:
            return bytes(ob.get_range(store, key, start=start, length=length))

        return await self._call("get_range", path, fetch, path)

    async def get_range_versioned(
        self, path: str, start: int, length: int, version: str | None
    ) -> tuple[bytes, str | None] | None:
        """A range read that also answers the object's ETag; with ``version`` (an ETag), of that version only.

        Returns:
            ``(bytes, etag)``, or ``None`` when ``version`` is given and the object has changed since
            (the server refused ``If-Match``).
        """

        if length <= 0:
            return b"", version

        def fetch(ob: ModuleType, store: Any, key: str) -> tuple[bytes, str | None] | None:
            options: GetOptions = {"range": (start, start + length)}
            if version is not None:
                options["if_match"] = version
            try:
                result = ob.get(store, key, options=options)
            except ob.exceptions.PreconditionError:
                return None
            return bytes(result.bytes()), result.meta.get("e_tag")

        return await self._call("get_range", path, fetch, path)

    async def get_range_buffer(self, path: str, start: int, length: int) -> memoryview:
        """Like :meth:`get_range`, but the answer stays in obstore's own buffer (no copy into a ``bytes``):
        for the :class:`~litstream.storage.Downloader`, which writes it straight to a file."""
        if length <= 0:
            return memoryview(b"")

        def fetch(ob: ModuleType, store: Any, key: str) -> memoryview:
            return memoryview(ob.get_range(store, key, start=start, length=length))

        return await self._call("get_range", path, fetch, path)

    async def get_into_file(self, path: str, file: Path, start: int = 0, length: int | None = None) -> int:
        """Write bytes ``[start, start + length)`` of object ``path`` (the whole object when ``length`` is
        ``None``) at the same offsets of the existing file ``file``, as they arrive, and return how many
        were written. For the :class:`~litstream.storage.Downloader`.

        The bytes pass through buffers of about :data:`STREAM_BUFFER` (256 KiB), never a buffer of the
        whole range: glibc keeps freed multi-MiB buffers in the malloc arena of the thread that allocated
        them, and these calls run in many worker threads, so reading whole 8 MiB pieces made a reader's
        resident memory grow with the bytes it had downloaded (+200 MiB over a 2.5 GB dataset). ``file``
        is opened here by its path and never created, so a call abandoned when its caller is cancelled
        writes into that file or nowhere, never into a descriptor reused meanwhile.

        Raises:
            ObjectNotFoundError: the object does not exist.
            StorageError: the request failed, or writing ``file`` failed (``file`` named in the message).
        """
        options: GetOptions = {} if length is None else {"range": (start, start + length)}
        if length == 0:
            return 0

        def fetch(ob: ModuleType, store: Any, key: str) -> int:
            return stream_into_file(ob.get(store, key, options=options), file, start, f"{self._url}/{key}")

        return await self._call("get_range", path, fetch, path)

    async def get_into_buffer(self, path: str, buffer: memoryview, start: int = 0, length: int | None = None) -> int:
        """Copy bytes ``[start, start + length)`` of object ``path`` (the whole object when ``length`` is
        ``None``) into ``buffer`` from its offset 0, as they arrive (~:data:`STREAM_BUFFER` at a time, as
        :meth:`get_into_file`), and return how many arrived; bytes beyond ``len(buffer)`` are counted, not
        copied. For the :class:`~litstream.storage._memory_fetch.MemoryFetcher`.

        Raises:
            ObjectNotFoundError: the object does not exist.
            StorageError: the request failed.
        """
        options: GetOptions = {} if length is None else {"range": (start, start + length)}
        if length == 0:
            return 0

        def fetch(ob: ModuleType, store: Any, key: str) -> int:
            return stream_into_buffer(ob.get(store, key, options=options), buffer)

        return await self._call("get_range", path, fetch, path)

    async def get_ranges(self, path: str, starts: Sequence[int], lengths: Sequence[int]) -> list[bytes]:
        """See :meth:`litstream.Store.get_ranges`; obstore merges nearby ranges into fewer requests."""
        if len(starts) != len(lengths):
            raise ValueError(f"get_ranges: {len(starts)} starts but {len(lengths)} lengths")

        def fetch(ob: ModuleType, store: Any, key: str) -> list[bytes]:
            return [bytes(b) for b in ob.get_ranges(store, key, starts=list(starts), lengths=list(lengths))]

        return await self._call("get_ranges", path, fetch, path)

    async def put(self, path: str, data: PutData) -> None:
        """See :meth:`litstream.Store.put`: in parts of ``part_size`` from ``multipart_threshold`` bytes on.

        A multipart upload is committed only when every part has arrived, so it is atomic too.
        """
        size = put_size(data)
        t = self._transfer
        multipart = size >= t.multipart_threshold
        payload: Any = Path(os.fspath(data)) if isinstance(data, os.PathLike) else data

        def upload(ob: ModuleType, store: Any, key: str) -> None:
            ob.put(
                store,
                key,
                payload,
                use_multipart=multipart,
                chunk_size=t.part_size,
                max_concurrency=t.part_concurrency,
            )

        await self._call("put", path, upload, path, abandon_on_cancel=False)

    async def head(self, path: str) -> ObjectMeta:
        """See :meth:`litstream.Store.head`."""

        def stat(ob: ModuleType, store: Any, key: str) -> ObjectMeta:
            meta = ob.head(store, key)
            return ObjectMeta(path, int(meta["size"]), meta.get("e_tag"))

        return await self._call("head", path, stat, path)

    async def list(self, prefix: str = "") -> list[ObjectMeta]:
        """See :meth:`litstream.Store.list`."""

        def collect(ob: ModuleType, store: Any) -> list[ObjectMeta]:
            out: list[ObjectMeta] = []
            # obstore lists whole path segments ("a" finds "a/x", not "ab"): list the folder, filter here.
            folder = prefix.rsplit("/", 1)[0] if "/" in prefix else None
            for batch in ob.list(store, prefix=folder):
                out.extend(ObjectMeta(str(m["path"]), int(m["size"]), m.get("e_tag")) for m in batch)
            return sorted((m for m in out if m.path.startswith(prefix)), key=lambda m: m.path)

        return await self._call("list", prefix, collect)

    async def delete(self, path: str) -> None:
        """See :meth:`litstream.Store.delete`."""

        def remove(ob: ModuleType, store: Any, key: str) -> None:
            try:
                ob.delete(store, key)
            except FileNotFoundError:
                pass

        await self._call("delete", path, remove, path, abandon_on_cancel=False)
