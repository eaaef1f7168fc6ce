"""The public calls on a dataset's versions: :func:`list_versions` and :func:`collect_garbage` (``docs/versions.md``).

``litstream versions PATH`` and ``litstream gc PATH`` are these calls on the command line.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import anyio

from .._core._bridge import run_sync
from .._core._errors import DatasetNotFoundError
from ..format._version_log import RETENTION_KEY, Retention, VersionRecord, index_digest
from ..read.source._versions import VersionLog
from ._args import output_store
from ._gc import GcReport, expire_versions, kept_versions, sweep_leftovers
from ._writer_lock import WriterLock

if TYPE_CHECKING:
    import os
    from collections.abc import Mapping

    from ..storage._resolver import Dir
    from ..storage._store import Store

__all__ = ["VersionInfo", "collect_garbage", "list_versions"]


@dataclass(frozen=True)
class VersionInfo:
    """One version of a dataset, as :func:`list_versions` reports it.

    Attributes:
        number: The version number (from 1); ``None`` for a latest ``index.json`` not recorded yet (written by
            LitData or an older litstream: the next commit or ``collect_garbage`` records it).
        committed_at: When it was committed (Unix seconds), ``None`` when not recorded.
        operation: The writer (``"optimize"``, ``"map"``, ...; ``"adopted"``: recorded after the fact).
        run_id: The writer run's id (``""`` when unknown).
        host: The writer's host (``""`` when unknown).
        samples: Items in the version.
        chunks: Chunk files it references.
        bytes: Sum of its chunks' ``chunk_bytes`` (before compression).
        latest: Whether it is the version ``index.json`` holds.
        expires_at: When retention may remove it (Unix seconds): ``None`` while it is kept however old.
    """

    number: int | None
    committed_at: float | None
    operation: str
    run_id: str
    host: str
    samples: int
    chunks: int
    bytes: int
    latest: bool
    expires_at: float | None = None


def _info(record: VersionRecord, latest: bool) -> VersionInfo:
    return VersionInfo(
        number=record.number,
        committed_at=record.committed_at,
        operation=record.operation,
        run_id=record.run_id,
        host=record.host,
        samples=record.samples,
        chunks=record.chunks,
        bytes=record.bytes,
        latest=latest,
    )


def _versions(log: VersionLog) -> list[VersionInfo]:
    from ._commit import record_for

    records = log.records()
    head = log.head()
    retention = log.retention()
    digest = None if head is None else index_digest(head[0])
    out = [_info(r, r.digest == digest and r is records[-1]) for r in records]
    if head is not None and (not records or records[-1].digest != digest):
        unrecorded = record_for(1, head[0], "unrecorded", None, 0.0)
        out.append(replace(_info(unrecorded, True), number=None, committed_at=None))
    kept = {r.number for r in kept_versions(records, retention, float("inf"))}
    for i, info in enumerate(out):  # a superseded version outside the newest `keep` expires `grace` after its successor
        successor = out[i + 1] if i + 1 < len(out) else None
        if info.number not in kept and successor is not None and successor.committed_at is not None:
            out[i] = replace(info, expires_at=successor.committed_at + retention.grace)
    return out


def list_versions(
    path: str | os.PathLike[str] | Dir | Store, *, storage_options: Mapping[str, Any] | None = None
) -> list[VersionInfo]:
    """The committed versions of the dataset at ``path`` that are kept, oldest first (reads only).

    Args:
        path: A dataset directory or URL (``s3://``, ``gs://``, ``azure://``), ``Dir`` or ``Store``.
        storage_options: Credentials and client options for an object store. Default ``None``.

    Returns:
        One :class:`VersionInfo` per kept version; the last one is the latest (``latest=True``).

    Raises:
        DatasetNotFoundError: ``path`` holds no committed version.
        FormatError: a file in the version log that litstream did not write.
    """
    log = VersionLog(output_store(path, storage_options))
    found: list[VersionInfo] = run_sync(anyio.to_thread.run_sync, _versions, log)
    if not found:
        raise DatasetNotFoundError(f"{log.url} holds no committed version (no index.json, no version log)")
    return found


def collect_garbage(
    path: str | os.PathLike[str] | Dir | Store,
    *,
    keep: int | None = None,
    grace: float | None = None,
    save: bool = False,
    dry_run: bool = False,
    storage_options: Mapping[str, Any] | None = None,
) -> GcReport:
    """Remove the versions retention no longer keeps and what runs killed before their commit left.

    Takes the output's writer lease for the time it runs (it refuses, naming the writer, while another run
    writes the dataset), so it never removes a file a live writer is about to commit. A version pinned by a
    reader is protected only by the grace period: a reader that opened a version finishes its epoch if the
    epoch ends within ``grace`` seconds of the commit that superseded it (``docs/versions.md``).

    Args:
        path: A dataset directory or URL, ``Dir`` or ``Store``.
        keep: Newest versions kept however old (``>= 1``); ``None``: the dataset's setting (default 1).
        grace: Seconds a superseded version stays readable (``>= 0``); ``None``: the dataset's setting
            (default 86,400: one day).
        save: Store ``keep`` and ``grace`` as the dataset's retention setting (``.litstream/retention.json``),
            which every later commit applies. Default ``False``: this call only.
        dry_run: Report what would be removed, remove nothing. Default ``False``.
        storage_options: Credentials and client options for an object store. Default ``None``.

    Returns:
        A :class:`GcReport`: versions expired and kept, and the files removed.

    Raises:
        ConfigurationError: a bad ``keep`` or ``grace``.
        OutputLockedError: another run is writing the dataset.
        FormatError: a file in the version log that litstream did not write.
    """
    store = output_store(path, storage_options)
    log = VersionLog(store)

    def collect() -> GcReport:
        current = log.retention()
        retention = Retention(
            keep=current.keep if keep is None else keep, grace=current.grace if grace is None else grace
        )
        lock = WriterLock(store, "gc").acquire()
        try:
            if save and not dry_run:
                found = log.objects.read(RETENTION_KEY)
                log.objects.put(RETENTION_KEY, retention.to_json(), None if found is None else found[1])
            report = expire_versions(log, retention, time.time(), dry_run=dry_run)
            names = {n for n in log.objects.names(".checkpoints/")}
            if not names:  # an interrupted run with checkpoints can still be resumed: its files stay
                report.removed += sweep_leftovers(log, dry_run=dry_run)
            return report
        finally:
            lock.release()

    report: GcReport = run_sync(anyio.to_thread.run_sync, collect)
    return report
