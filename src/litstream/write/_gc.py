"""Retention and garbage collection: which versions a dataset keeps, and removing the files nothing needs.

Two kinds of files are removed, each only while the writer lease is held (no other writer can be mid-run):

* **Expired versions** (:func:`expire_versions`, after every commit): a version that retention no longer keeps
  (:class:`~litstream.format._version_log.Retention`: the newest ``keep`` versions, and every version
  superseded less than ``grace`` seconds ago, are kept) loses its record, its index copy, then the data
  files that no kept version references. The record goes first, so a crash part way leaves only files that
  no version names, which the next sweep removes.
* **Leftovers** (:func:`sweep_leftovers`, at the start of a write and in ``litstream gc``): chunk files,
  partial indexes, staged index copies and temporaries that no recorded version references, written by a
  run that died before its commit. A run that can still be resumed (``.checkpoints/`` present) is left alone.

Only names of the dataset's own kinds are ever removed (``chunk-*.bin``, ``{rank}.index.json``,
``{node}-index.json``, the version log's files, hidden temporaries); a user's other files are never touched.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .._core._crash import crash_point
from .._core._errors import FormatError
from ..format._index import Index, is_partial_index_name
from ..format._version_log import Retention, VersionRecord, index_key, parse_log_name, record_key
from ..storage._versioned import VersionConflictError
from ._commit import adopt_head
from .run._nodes import chunk_rank

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

    from ..read._versions import VersionLog

__all__ = ["GcReport", "expire_versions", "kept_versions", "referenced_files", "sweep_leftovers"]

_LOG = logging.getLogger("litstream")


@dataclass
class GcReport:
    """What a garbage collection removed (or, in a dry run, would remove).

    Attributes:
        expired: Version numbers whose records were removed.
        kept: Version numbers kept.
        removed: Keys of the files removed (or to remove).
    """

    expired: list[int] = field(default_factory=list)
    kept: list[int] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


def kept_versions(records: Sequence[VersionRecord], retention: Retention, now: float) -> list[VersionRecord]:
    """The records ``retention`` keeps at ``now`` (Unix seconds): the newest ``keep``, and every version whose
    successor was committed less than ``grace`` seconds ago. Pure."""
    ordered = sorted(records, key=lambda r: r.number)
    keep: list[VersionRecord] = []
    for i, record in enumerate(ordered):
        newest = i >= len(ordered) - retention.keep
        successor = ordered[i + 1] if i + 1 < len(ordered) else None
        if newest or successor is None or now - successor.committed_at < retention.grace:
            keep.append(record)
    return keep


def _files_of(data: bytes, source: str) -> set[str]:
    try:
        return {c.filename for c in Index.from_json(data, source=source).chunks}
    except FormatError:
        return set()  # an index litstream cannot parse names no file it would remove


def referenced_files(log: VersionLog, records: Sequence[VersionRecord]) -> set[str]:
    """The data files ``index.json`` and the given versions reference (a version whose copy is gone: none)."""
    names: set[str] = set()
    head = log.head()
    if head is not None:
        names |= _files_of(head[0], "index.json")
    for record in records:
        found = log.objects.read(index_key(record.number))
        if found is not None:
            names |= _files_of(found[0], index_key(record.number))
    return names


def _delete(log: VersionLog, key: str) -> None:
    version = log.objects.version(key)
    if version is not None:
        log.objects.delete(key, version)


def expire_versions(
    log: VersionLog, retention: Retention | None = None, now: float | None = None, dry_run: bool = False
) -> GcReport:
    """Remove the versions ``retention`` (default: the dataset's setting) no longer keeps, and their files.

    Call it only while holding the writer lease. Returns what was (or, with ``dry_run``, would be) removed.
    """
    retention = log.retention() if retention is None else retention
    now = time.time() if now is None else now
    records = adopt_head(log) if not dry_run else log.records()
    kept = kept_versions(records, retention, now)
    expired = [r for r in records if r not in kept]
    report = GcReport(expired=[r.number for r in expired], kept=[r.number for r in kept])
    if not expired:
        return report
    still = referenced_files(log, kept)
    gone = referenced_files(log, expired) - still
    report.removed = [record_key(r.number) for r in expired] + [index_key(r.number) for r in expired] + sorted(gone)
    if dry_run:
        return report
    for record in expired:  # records first: from here on no reader can open these versions
        _delete(log, record_key(record.number))
    crash_point("gc:records-removed")
    for record in expired:
        _delete(log, index_key(record.number))
    for name in sorted(gone):
        _delete(log, name)
        crash_point("gc:file-removed")
    _LOG.info("%s: retention removed versions %s (%d files)", log.url, report.expired, len(gone))
    return report


def _own_kind(name: str) -> bool:
    """A file of the dataset's own kinds at the top level (never a user's file)."""
    if "/" in name:
        return False
    return chunk_rank(name) is not None or is_partial_index_name(name)


def sweep_leftovers(
    log: VersionLog, ranks: Collection[int] | None = None, dry_run: bool = False, also: Collection[str] = ()
) -> list[str]:
    """Remove what runs that died before their commit left: unreferenced chunk files and partial indexes, and
    staged index copies nobody recorded. With ``ranks`` (a node of a multi-node run): only those ranks' chunk
    files and the names in ``also`` (the node's own partial indexes); other nodes may be writing theirs.

    Call it only while holding the writer lease, and not when an interrupted run is to be resumed. Returns
    the keys removed (or, with ``dry_run``, to remove).
    """
    records = adopt_head(log) if not dry_run else log.records()
    keep = referenced_files(log, records)
    recorded = {r.number for r in records}
    newest = max(recorded, default=0)
    doomed: list[str] = []
    for name in log.objects.names(""):
        if not _own_kind(name) or name in keep:
            continue
        rank = chunk_rank(name)
        if ranks is not None and (rank is None or rank not in ranks) and name not in also:
            continue
        doomed.append(name)
    if ranks is None:
        for key in log.objects.names(index_key(1).rpartition("/")[0] + "/"):
            parsed = parse_log_name(key)
            if parsed is not None and parsed[1] == "index" and parsed[0] not in recorded and parsed[0] > newest:
                doomed.append(key)
    if dry_run or not doomed:
        return doomed
    for name in doomed:
        try:
            _delete(log, name)
        except VersionConflictError:
            continue
    _LOG.warning(
        "%s: removed %d files of a run that ended before its commit (%s)",
        log.url,
        len(doomed),
        ", ".join(doomed[:3]) + (", ..." if len(doomed) > 3 else ""),
    )
    return doomed
