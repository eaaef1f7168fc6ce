"""The trace categories, one table: LitData 0.2.76's (``litdata.debugger``) and litstream's ``write``.

The recorder (``_trace``) keeps events by these names and :mod:`litstream.debugger` re-exports them; both
take their ``__all__`` from this module's.
"""

from __future__ import annotations

__all__ = [
    "ALL_CATEGORIES",
    "CAT_BATCH",
    "CAT_CRASH",
    "CAT_DECOMPRESS",
    "CAT_DELETE",
    "CAT_DOWNLOAD",
    "CAT_EPOCH",
    "CAT_LOCK",
    "CAT_READ",
    "CAT_SAMPLE",
    "CAT_WRITE",
]

CAT_EPOCH = "epoch"
CAT_BATCH = "batch"
CAT_DOWNLOAD = "download"
CAT_READ = "read"
CAT_DELETE = "delete"
CAT_DECOMPRESS = "decompress"
CAT_SAMPLE = "sample"
CAT_LOCK = "lock"
CAT_CRASH = "crash"
CAT_WRITE = "write"  # litstream's own: optimize's chunk writes and uploads

ALL_CATEGORIES = (
    CAT_EPOCH, CAT_BATCH, CAT_DOWNLOAD, CAT_READ, CAT_DELETE, CAT_DECOMPRESS, CAT_SAMPLE, CAT_LOCK, CAT_CRASH,
    CAT_WRITE,
)  # fmt: skip
