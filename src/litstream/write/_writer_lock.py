"""One writer at a time: the lease that ``optimize``, ``map`` and ``AsyncUploader`` hold on their output.

A run takes the lease before it changes anything in the output and gives it back when it ends (success,
failure, ``KeyboardInterrupt``). The lease is a small JSON object next to the data,
``.litstream-writer-{node_rank}.json`` (a hidden name: LitData and litstream readers only open the chunks
``index.json`` lists, and local listings skip dot-files), naming the run: its id, the operation, the
host, the pid and when it started. It is created with a conditional put (``If-None-Match: *`` on object
stores, an exclusive rename under ``flock`` on local disk: :mod:`litstream.storage._versioned`), so of
two runs that start together exactly one gets it; the other fails at once with
:class:`~litstream.OutputLockedError` naming the holder.

**Stale-lock rule.** A heartbeat thread renews the lease every ``ttl / 4`` seconds (``ttl`` 60 s by
default) while the run is alive. A lease is *stale*, and the next run takes it over (with a conditional
put on the version it read, so only one run can take it over), when:

* its holder ran on this machine (same host name, boot and pid namespace) and that process is gone (or is
  another process with the same pid: the start time is compared), or
* its holder ran on another machine and the lease has not been renewed for ``ttl`` seconds, or
* it is a finished node's lease (below) and the new run is a node of a run of the same node count (a
  re-run of that node).

A live process on this machine is never taken over, however long it pauses.

**A lost lease stops the run.** When the heartbeat finds the lease taken over, ``lost`` says so; the
runner polls it and kills the worker processes (:func:`~._runner.run_jobs` ``abort``).

**The commit is guarded.** ``index.json`` is written with a conditional put too: only if the lease is still
this run's (renewed just before) and ``index.json`` is still the version the run started from. A run whose
lease was taken over, or whose output was changed by another writer meanwhile, fails at commit and
reports no success. The commit publishes a new version of the dataset (``_commit.py``: staged index copy,
the conditional put, the version record), then expires what retention no longer keeps (``_gc.py``).

**Several nodes.** A multi-node ``optimize`` (``DATA_OPTIMIZER_NUM_NODES``) takes one lease per node (the
``node_rank`` in the name) and refuses to run beside a lease of another node count (a single run is node
0 of 1). A node that has written its share keeps its lease, marked finished, until the last node has
written ``index.json`` and removed every node's lease, or until ``DATA_OPTIMIZER_TIMEOUT`` plus ``ttl``
seconds have passed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import uuid
import weakref
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from .._core._errors import OutputLockedError
from ..format._index import INDEX_FILENAME
from ..read.source._versions import VersionLog
from ..storage._versioned import VersionConflictError, versioned
from ._commit import commit_version
from ._gc import expire_versions, sweep_leftovers
from ._lease_holder import Holder, machine, start_time

if TYPE_CHECKING:
    from collections.abc import Collection

    from ..format._version_log import Retention
    from ..storage._store import Store

__all__ = ["DEFAULT_TTL", "LOCK_PREFIX", "WriterLock", "is_lock_name", "lock_name", "set_lease_ttl"]

LOCK_PREFIX = ".litstream-writer-"
DEFAULT_TTL = 60.0
"""Seconds a lease on another machine stays valid without a heartbeat."""


_TTL = [DEFAULT_TTL]
_LOG = logging.getLogger("litstream")


def set_lease_ttl(seconds: float | None) -> None:
    """Set the validity of leases made later in this process (``None``: back to :data:`DEFAULT_TTL`).

    The heartbeat renews every quarter of it. For tests of the stale-lock rule; not a public setting.
    """
    _TTL[0] = DEFAULT_TTL if seconds is None else float(seconds)


def lock_name(node_rank: int) -> str:
    """``.litstream-writer-{node_rank}.json``: the lease key of one node of a run."""
    return f"{LOCK_PREFIX}{node_rank}.json"


def is_lock_name(name: str) -> bool:
    """Whether ``name`` (a key relative to the output) is a writer lease."""
    return name.startswith(LOCK_PREFIX) and name.endswith(".json") and "/" not in name


_LIVE: weakref.WeakSet[WriterLock] = weakref.WeakSet()
"""Locks whose heartbeat thread runs. Around a fork the thread is stopped and joined, and restarted in the
parent afterwards: the child (an optimize worker) never inherits a thread, or a half-done renewal."""
_PAUSED: list[WriterLock] = []


def _before_fork() -> None:
    for lock in list(_LIVE):
        if lock._thread is not None:
            lock._stop_heartbeat()
            _PAUSED.append(lock)


def _after_fork_in_parent() -> None:
    while _PAUSED:
        _PAUSED.pop()._start_heartbeat()


def _after_fork_in_child() -> None:
    _PAUSED.clear()
    _LIVE.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_after_fork_in_child)


class WriterLock:
    """The lease of one run (one node of a multi-node run) on one output.

    Args:
        store: The output.
        operation: ``"optimize"``, ``"map"`` or ``"AsyncUploader"``, for messages.
        node_rank: This node's rank (0 on a single node).
        num_nodes: Nodes of the run (1 on a single node).
        ttl: Seconds a lease stays valid without a heartbeat (for holders on other machines); default
            :data:`DEFAULT_TTL`, or what :func:`set_lease_ttl` set.
    """

    def __init__(
        self, store: Store, operation: str, *, node_rank: int = 0, num_nodes: int = 1, ttl: float | None = None
    ) -> None:
        self._objects = versioned(store)
        self._log = VersionLog(store)
        self._url = store.url
        self._key = lock_name(node_rank)
        now = time.time()
        pid = os.getpid()
        self.holder = Holder(
            run_id=uuid.uuid4().hex[:12],
            operation=operation,
            host=socket.gethostname(),
            machine=machine(),
            pid=pid,
            pid_start=start_time(pid),
            started=now,
            renewed=now,
            expires=now + (ttl := _TTL[0] if ttl is None else ttl),
            node_rank=node_rank,
            num_nodes=num_nodes,
        )
        self._ttl = ttl
        self._version: str | None = None
        self._index_version: str | None = None
        self._index_noted = False
        self._mutex = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.lost: str | None = None
        self.took_over: str | None = None
        self.took_over_dead = False  # the lease taken over was a running one whose run died (not a finished node's)

    # -- taking and giving back -------------------------------------------------------------------

    def _refused(self, holder: Holder | None, key: str) -> OutputLockedError:
        who = holder.describe() if holder is not None else f"an unreadable lock file {key}"
        return OutputLockedError(
            f"output_dir {self._url} is being written by {who}; wait until it has finished, or write elsewhere. "
            f"If no run is writing there any more, delete {self._url}/{key} (a crashed run's lock is taken "
            "over by itself: at once on the same host, after its lease expires on another)"
        )

    def acquire(self) -> WriterLock:
        """Take the lease (or a stale one over) and start the heartbeat.

        Raises:
            OutputLockedError: another live run holds it (or a lease of another node count), naming it.
        """
        for _ in range(8):
            now = time.time()
            mine = replace(self.holder, renewed=now, expires=now + self._ttl)
            try:
                self._version = self._objects.put(self._key, mine.to_json(), None)
                break
            except VersionConflictError:
                found = self._objects.read(self._key)
            if found is None:
                continue  # released meanwhile
            data, version = found
            other = Holder.from_json(data)
            reason = other.stale_reason(time.time(), mine) if other is not None else None
            if other is None or reason is None:
                raise self._refused(other, self._key)
            try:
                self._version = self._objects.put(self._key, mine.to_json(), version)
            except VersionConflictError:
                continue  # another run took it over first
            self.took_over = f"took over the lock of {other.describe()}: {reason}"
            self.took_over_dead = other.state == "running"
            break
        else:
            raise OutputLockedError(f"output_dir {self._url}: other runs keep taking its writer lock; try again")
        self.holder = mine
        try:
            self._check_other_nodes()
        except BaseException:
            self.release()
            raise
        self._start_heartbeat()
        _LIVE.add(self)
        return self

    def _check_other_nodes(self) -> None:
        """Refuse to run beside a live lease of another node count (a single run is node 0 of 1)."""
        for key in self._objects.names(LOCK_PREFIX):
            if key == self._key or not is_lock_name(key):
                continue
            found = self._objects.read(key)
            if found is None:
                continue
            other = Holder.from_json(found[0])
            if other is None or (other.num_nodes != self.holder.num_nodes and other.stale_reason(time.time()) is None):
                raise self._refused(other, key)

    def release(self) -> None:
        """Stop the heartbeat and delete the lease if it is still this run's (never raises for a lost one)."""
        self._stop_heartbeat()
        _LIVE.discard(self)
        with self._mutex:
            if self._version is not None and self.lost is None:
                with contextlib.suppress(Exception):
                    self._objects.delete(self._key, self._version)
            self._version = None

    def release_run(self) -> None:
        """On the last node, after ``index.json``: remove this lease and every node lease of this run."""
        self.release()
        for rank in range(self.holder.num_nodes):
            found = self._objects.read(lock_name(rank))
            if found is not None:
                other = Holder.from_json(found[0])
                if other is not None and other.num_nodes == self.holder.num_nodes:
                    with contextlib.suppress(Exception):
                        self._objects.delete(lock_name(rank), found[1])

    def hand_over(self, timeout: float) -> None:
        """A node that has written its share keeps its lease, marked finished, for ``timeout + ttl`` seconds."""
        self._stop_heartbeat()
        _LIVE.discard(self)
        now = time.time()
        self._renew(replace(self.holder, state="finished", renewed=now, expires=now + timeout + self._ttl))
        self._version = None

    # -- while running ------------------------------------------------------------------------------

    def _renew(self, holder: Holder | None = None) -> None:
        with self._mutex:
            if self.lost is not None:
                raise OutputLockedError(self.lost)
            now = time.time()
            holder = holder or replace(self.holder, renewed=now, expires=now + self._ttl)
            try:
                self._version = self._objects.put(self._key, holder.to_json(), self._version)
            except VersionConflictError:
                found = self._objects.read(self._key)
                other = Holder.from_json(found[0]) if found is not None else None
                by = f" by {other.describe()}" if other is not None and other.run_id != self.holder.run_id else ""
                self.lost = (
                    f"output_dir {self._url}: this {self.holder.operation} run {self.holder.run_id} lost its writer "
                    f"lock {self._key}: it was removed or taken over{by}; nothing was committed"
                )
                raise OutputLockedError(self.lost) from None
            self.holder = holder

    def _beat(self, stop: threading.Event) -> None:
        while not stop.wait(self._ttl / 4):
            with contextlib.suppress(Exception):  # a failed renewal is retried; a lost lease fails the commit
                self._renew()
            if self.lost is not None:
                return

    def _start_heartbeat(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, args=(self._stop,), name="litstream-lease", daemon=True)
        self._thread.start()

    def _stop_heartbeat(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self._thread = None

    def confirm(self) -> None:
        """Renew the lease now: the commit of a run that writes no ``index.json``.

        Raises:
            OutputLockedError: the lease was lost (taken over or removed).
        """
        self._renew()

    def note_index(self) -> None:
        """Record the version of ``index.json`` this run starts from (after preparing the output); without
        it (the nodes of a multi-node run), the commit only checks that the lease is still this run's."""
        self._index_version = self._objects.version(INDEX_FILENAME)
        self._index_noted = True

    def commit_index(self, data: bytes, retention: Retention | None = None) -> None:
        """Publish ``data`` as the new ``index.json`` and version of the output (``_commit.commit_version``) if
        the lease is still this run's and ``index.json`` is as the run found it; then expire what retention no
        longer keeps (``_gc.expire_versions``; a failure there is logged, the commit stands).

        Args:
            data: The new ``index.json``'s bytes.
            retention: The retention applied after this commit. Default ``None``: the dataset's setting.

        Raises:
            OutputLockedError: the lease was lost, or ``index.json`` changed meanwhile; nothing was committed.
        """
        self._renew()
        if not self._index_noted:
            self._index_version = self._objects.version(INDEX_FILENAME)
        try:
            self._index_version = commit_version(self._log, data, self._index_version, self.holder)
            self._index_noted = True
        except VersionConflictError:
            raise OutputLockedError(
                f"output_dir {self._url}: {INDEX_FILENAME} was changed by another writer while this "
                f"{self.holder.operation} run {self.holder.run_id} was writing; its commit is refused and its "
                "samples are not in the dataset"
            ) from None
        try:
            expire_versions(self._log, retention)
        except Exception as exc:  # the version is committed; what retention removes waits for the next commit
            _LOG.warning("%s: committed, but removing expired versions failed: %s", self._url, exc)

    def sweep(self, ranks: Collection[int] | None = None, also: Collection[str] = ()) -> list[str]:
        """Remove what runs that died before their commit left (``_gc.sweep_leftovers``: everything, or on a node
        of a multi-node run its ``ranks``' files and the names in ``also``); returns the keys."""
        return sweep_leftovers(self._log, ranks, also=also)

    async def aacquire(self) -> WriterLock:
        """:meth:`acquire` from async code (in a worker thread)."""
        return await anyio.to_thread.run_sync(self.acquire)

    async def arelease(self) -> None:
        """:meth:`release` from async code, carried out even when the caller is cancelled."""
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self.release)

    async def acommit_index(self, data: bytes, retention: Retention | None = None) -> None:
        """:meth:`commit_index` from async code (in a worker thread, waited for even when cancelled)."""
        await anyio.to_thread.run_sync(self.commit_index, data, retention)

    def __enter__(self) -> WriterLock:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release()
