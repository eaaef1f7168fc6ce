"""The commit: how every writer publishes a new version of a dataset, in one atomic step.

Every writer (``optimize``, ``map``, append, overwrite, ``merge_datasets``, ``dataset_update``,
``complete_dataset``, ``AsyncUploader``, LitData's ``Cache``, the last node of a multi-node run) writes its
data files under names no committed version uses, holds the writer lease (``_writer_lock.py``) and ends
with :func:`commit_version`, called from :meth:`~._writer_lock.WriterLock.commit_index`:

1. **Adopt the current head.** If ``index.json`` is not the newest recorded version (written by LitData, by
   an older litstream, or by a run killed between steps 3 and 4), it is recorded first, so the version log
   always holds every version a reader could have opened.
2. **Stage.** The new index's exact bytes are stored as ``.litstream/versions/{n}.index.json`` (``n``: one
   more than the newest record). A file left there by a run killed before step 3 is overwritten: it was
   never committed.
3. **Commit.** ``index.json`` is replaced with a conditional put on the version of ``index.json`` the run
   started from (a rename under ``flock`` locally; ``If-Match`` / ``If-None-Match`` on object stores): the
   one atomic step that makes the version visible, to LitData and litstream alike. If another writer
   changed ``index.json`` meanwhile, nothing is committed.
4. **Record.** ``{n}.json`` (:class:`~litstream.format._version_log.VersionRecord`: time, writer, counts) is
   created. A crash before it leaves a committed version without a record: step 1 of the next commit (or
   ``litstream versions``/``gc``) records it.
5. **Expire** what retention no longer keeps (``_gc.expire_versions``); never this run's files.

The functions are synchronous (a few small requests): the writer lease calls them in a worker thread.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from .._core._crash import crash_point
from .._core._errors import FormatError
from ..format._index import INDEX_FILENAME, Index
from ..format._version_log import VersionRecord, index_digest, index_key, record_key
from ..storage._versioned import VersionConflictError

if TYPE_CHECKING:
    from ..read.source._versions import VersionLog
    from ._lease_holder import Holder

__all__ = ["adopt_head", "commit_version", "record_for"]

_LOG = logging.getLogger("litstream")


def record_for(number: int, data: bytes, operation: str, holder: Holder | None, committed_at: float) -> VersionRecord:
    """The record of version ``number`` whose ``index.json`` is ``data`` (counts from the index when it parses)."""
    samples = chunks = size = 0
    try:
        index = Index.from_json(data)
        chunks = len(index.chunks)
        samples = sum(max(0, int(c.chunk_size)) for c in index.chunks)
        size = sum(max(0, int(c.chunk_bytes or 0)) for c in index.chunks)
    except (FormatError, TypeError, ValueError):
        pass  # an index litstream cannot parse is still a version LitData may read; its counts stay 0
    return VersionRecord(
        number=number,
        committed_at=committed_at,
        digest=index_digest(data),
        operation=operation if holder is None else holder.operation,
        run_id="" if holder is None else holder.run_id,
        host="" if holder is None else holder.host,
        pid=0 if holder is None else holder.pid,
        samples=samples,
        chunks=chunks,
        bytes=size,
    )


def adopt_head(log: VersionLog) -> VersionRecord | None:
    """Record ``index.json`` as a version if the log's newest record is not it; returns the newest record after
    (``None``: no ``index.json`` and an empty log). Reads one record, whatever the log's length.

    Call it only while holding the writer lease (it writes the log).
    """
    newest = log.newest()
    head = log.head()
    if head is None:
        return newest
    digest = index_digest(head[0])
    if newest is not None and newest.digest == digest:
        return newest
    number = newest.number + 1 if newest is not None else 1
    staged = log.objects.read(index_key(number))
    if staged is None or index_digest(staged[0]) != digest:  # not a staged copy of this head: store one
        log.objects.put(index_key(number), head[0], None if staged is None else staged[1])
    record = record_for(number, head[0], "adopted", None, time.time())
    try:
        log.objects.put(record_key(number), record.to_json(), None)
    except VersionConflictError:  # recorded meanwhile by a process that did not hold the lease
        return log.newest()
    _LOG.info("%s: recorded the current index.json as version %d (%s)", log.url, number, "adopted")
    return record


def commit_version(log: VersionLog, data: bytes, expect: str | None, holder: Holder) -> str:
    """Publish ``data`` as the dataset's new ``index.json`` and version (steps 1-4 of the module docstring).

    Args:
        log: The output's version log.
        data: The new ``index.json`` bytes.
        expect: The store version of ``index.json`` the run started from (``None``: there was none).
        holder: The run committing (its writer lease).

    Returns:
        The store version of the new ``index.json``.

    Raises:
        VersionConflictError: ``index.json`` is not at ``expect`` any more; nothing was committed.
    """
    newest = adopt_head(log)
    number = newest.number + 1 if newest is not None else 1
    staged_key = index_key(number)
    log.objects.put(staged_key, data, log.objects.version(staged_key))
    crash_point("commit:staged")
    version = log.objects.put(INDEX_FILENAME, data, expect)  # the commit
    crash_point("commit:published")
    record = record_for(number, data, holder.operation, holder, time.time())
    log.objects.put(record_key(number), record.to_json(), None)
    crash_point("commit:recorded")
    return version
