"""LitData's ``LITDATA_*`` environment variables: the ones litstream honours, and a warning for the rest.

LitData 0.2.76 reads about 35 ``LITDATA_*`` variables. Two change what or in which order data is read
or written, and litstream honours them with LitData's meaning (through ``_environ.environ()``):

* ``LITDATA_CACHE_DIR``: the chunk cache root (``storage._cache_dirs``).
* ``LITDATA_ITEM_SHUFFLE_WINDOW``: the in-chunk shuffle block size when ``item_shuffle_window`` is left
  at ``None`` / ``"auto"`` (``read._item_window.item_shuffle_window_value``).

Every other one tunes LitData's speed, logging or housekeeping. litstream does not read its value;
when one is set, :func:`warn_ignored` warns once per process and variable, naming what to use instead
(:data:`IGNORED`), unless its value makes LitData behave as litstream does (:data:`AS_LITSTREAM`:
``LITDATA_POSIX_FAST=0``). ``docs/environment.md`` lists both groups (a test keeps it in step, and another
checks that the two groups cover every ``LITDATA_*`` name in the installed LitData).
"""

from __future__ import annotations

import threading
import warnings

from ._environ import litdata_variables_set

__all__ = ["HONOURED", "IGNORED", "warn_ignored"]

HONOURED = ("LITDATA_CACHE_DIR", "LITDATA_ITEM_SHUFFLE_WINDOW")

_TRACER = "litstream.debugger.enable_tracer(...) (see docs/tracing.md)"
_PREFETCH = "StreamingDataset(max_pre_download=...); litstream schedules its own downloads"
_MMAP = "nothing: local chunks are memory-mapped by litstream"
_WRITERS = "optimize(num_workers=...) or optimize(executor=...); litstream uploads as it writes"
_RANGES = "nothing: litstream sizes its own range requests per store"

IGNORED: dict[str, str] = {
    "LITDATA_ASYNC_CHUNK_PREFETCH": _PREFETCH,
    "LITDATA_ASYNC_DOWNLOAD_CONCURRENCY": _PREFETCH,
    "LITDATA_ASYNC_MIN_PRE_DOWNLOAD": _PREFETCH,
    "LITDATA_BATCH_DECODE": "nothing: litstream decodes whole chunks in batches itself",
    "LITDATA_BATCH_ROWS": "nothing: litstream decodes whole chunks in batches itself",
    "LITDATA_CHECK_UPDATES": "nothing: litstream never checks for new versions",
    "LITDATA_DIRECT_IO_ROOT": _MMAP,
    "LITDATA_DIRECT_IO_SUFFIXES": _MMAP,
    "LITDATA_DISABLE_VERSION_CHECK": "nothing: litstream never checks for new versions",
    "LITDATA_HF_CACHE_DIR": "StreamingDataset(cache_dir=...) or LITSTREAM_CACHE_DIR for the hf:// index",
    "LITDATA_LOG_FILE": _TRACER,
    "LITDATA_LOG_GETITEM": _TRACER,
    "LITDATA_LOG_ITEM_LOADER": _TRACER,
    "LITDATA_LOG_ITERATING_DATASET": _TRACER,
    "LITDATA_LOG_LEVEL": _TRACER,
    "LITDATA_OBSTORE_RANGE_PARTS": _RANGES,
    "LITDATA_OBSTORE_STREAM_MIN_CHUNK_MIB": _RANGES,
    "LITDATA_OPTIMIZE_DOWNLOAD_BATCH": _WRITERS,
    "LITDATA_OPTIMIZE_DOWNLOAD_CONCURRENCY": _WRITERS,
    "LITDATA_OPTIMIZE_SPLIT_WRITERS": _WRITERS,
    "LITDATA_OPTIMIZE_UPLOAD_BATCH": _WRITERS,
    "LITDATA_POSIX_FAST": "shuffle='window' with shuffle_window=N for a windowed order (LitData's fast path on "
    "parallel file systems); litstream serves LitData's FullShuffle order and memory-maps local chunks",
    "LITDATA_POSIX_MAX_WORKERS": _MMAP,
    "LITDATA_POSIX_PAGE_BYTES": _MMAP,
    "LITDATA_POSIX_RAM_FRACTION": _MMAP,
    "LITDATA_POSIX_SHUFFLE_WINDOW": "shuffle='window' with shuffle_window=N (chunks mixed per worker)",
    "LITDATA_POSIX_WILLNEED": _MMAP,
    "LITDATA_POSIX_WORKER_RSS": _MMAP,
    "LITDATA_PREFETCH_BYTES": _PREFETCH,
    "LITDATA_RAW_DEBUG": _TRACER,
    "LITDATA_TIMING": _TRACER,
    "LITDATA_TRACE_CATEGORIES": _TRACER,
    "LITDATA_TRACE_LEVEL": _TRACER,
}
"""Each LitData variable litstream ignores, and what to use instead."""

AS_LITSTREAM: dict[str, frozenset[str]] = {"LITDATA_POSIX_FAST": frozenset({"0", "false", "False"})}
"""Values that make LitData behave as litstream does (its fast path off): no warning for them."""

_WARNED: set[str] = set()
_LOCK = threading.Lock()


def warn_ignored(stacklevel: int = 3) -> None:
    """Warn (``UserWarning``) once per process for each set ``LITDATA_*`` variable litstream does not honour.

    Called where a job starts (``StreamingDataset``, ``StreamingRawDataset``, ``optimize`` / ``map``).
    A ``LITDATA_*`` name LitData 0.2.76 does not know is named too.
    """
    with _LOCK:
        fresh = [
            name
            for name, value in litdata_variables_set()
            if name not in HONOURED and name not in _WARNED and value.strip() not in AS_LITSTREAM.get(name, ())
        ]
        _WARNED.update(fresh)
    for name in fresh:
        instead = IGNORED.get(name, "see docs/environment.md for the variables litstream reads")
        warnings.warn(
            f"{name} is set, but litstream ignores it (a LitData setting); use {instead}",
            UserWarning,
            stacklevel=stacklevel,
        )
