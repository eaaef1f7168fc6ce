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
from ..format._version_log import VERSIONS_DIR, Retention, VersionRecord, index_key, parse_log_name, record_key
from ..storage._versioned import VersionConflictError
from ._commit import adopt_head
from .run._nodes import chunk_rank

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

    from ..read.source._versions import VersionLog

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
    successor was committed less than ``grace`` seconds ago, with every version after it. Pure."""
    ordered = sorted(records, key=lambda r: r.number)
    first = max(0, len(ordered) - retention.keep)
    for i in range(first):
        if now - ordered[i + 1].committed_at < retention.grace:  # superseded recently: kept, and all after it
            first = i
            break
    return ordered[first:]


def _files_of(data: bytes, source: str) -> set[str]:
    try:
        return {c.filename for c in Index.from_json(data, source=source).chunks}
    except FormatError:
        return set()  # an index litstream cannot parse names no file it would remove


def _version_files(log: VersionLog, number: int) -> set[str]:
    found = log.objects.read(index_key(number))
    return set() if found is None else _files_of(found[0], index_key(number))


def _head_files(log: VersionLog) -> set[str]:
    head = log.head()
    return set() if head is None else _files_of(head[0], "index.json")


def referenced_files(log: VersionLog, numbers: Sequence[int]) -> set[str]:
    """The data files ``index.json`` and the given versions reference (a version whose copy is gone: none)."""
    names = _head_files(log)
    for number in numbers:
        names |= _version_files(log, number)
    return names


def _delete(log: VersionLog, key: str) -> None:
    version = log.objects.version(key)
    if version is not None:
        log.objects.delete(key, version)


def expire_versions(
    log: VersionLog, retention: Retention | None = None, now: float | None = None, dry_run: bool = False
) -> GcReport:
    """Remove the versions ``retention`` (default: the dataset's setting) no longer keeps, and their files.

    Reads only the records it needs (oldest first, up to the first version retention keeps): a commit costs
    the same however many versions are kept. A file of an expired version is removed unless the oldest kept
    version or ``index.json`` references it: a file, once left out of a version, is never referenced again
    (new files get new names), so the versions that reference a file are consecutive.

    Call it only while holding the writer lease. Returns what was (or, with ``dry_run``, would be) removed.
    """
    retention = log.retention() if retention is None else retention
    now = time.time() if now is None else now
    if not dry_run:
        adopt_head(log)
    numbers = log.numbers()
    expired: list[int] = []
    for i in range(max(0, len(numbers) - retention.keep)):
        successor = log.record(numbers[i + 1])
        if successor is None or now - successor.committed_at < retention.grace:
            break  # commit times grow with the numbers: every later version is kept too
        expired.append(numbers[i])
    kept = numbers[len(expired) :]
    report = GcReport(expired=expired, kept=kept)
    if not expired:
        return report
    gone: set[str] = set()
    for number in expired:
        gone |= _version_files(log, number)
    gone -= _head_files(log) | (_version_files(log, kept[0]) if kept else set())
    report.removed = [record_key(n) for n in expired] + [index_key(n) for n in expired] + sorted(gone)
    if dry_run:
        return report
    for number in expired:  # records first: from here on no reader can open these versions
        _delete(log, record_key(number))
    crash_point("gc:records-removed")
    for number in expired:
        _delete(log, index_key(number))
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
    if not dry_run:
        adopt_head(log)
    numbers = log.numbers()
    newest = numbers[-1] if numbers else 0
    head = _head_files(log)
    candidates: list[str] = []
    for name in log.objects.names(""):
        if not _own_kind(name) or name in head:
            continue
        rank = chunk_rank(name)
        if ranks is not None and (rank is None or rank not in ranks) and name not in also:
            continue
        candidates.append(name)
    left = set(candidates)
    for number in reversed(numbers):  # newest first; usually nothing is left to look for after one or two
        if not left:
            break
        left -= _version_files(log, number)
    doomed = [n for n in candidates if n in left]
    if ranks is None:
        for key in log.objects.names(VERSIONS_DIR + "/"):
            parsed = parse_log_name(key)
            if parsed is not None and parsed[1] == "index" and parsed[0] not in numbers and parsed[0] > newest:
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
