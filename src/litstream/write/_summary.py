"""What a run did: each worker's counts, and the run's summary that ``optimize`` and ``map`` return.

Workers report a :class:`WorkerSummary` when they finish; the runner checks that every input a worker
was given (or that was sent to it from a queue) was finished before anything is committed, and the
caller folds the reports into one :class:`RunSummary`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["RunSummary", "WorkerSummary", "summarize"]


@dataclass(frozen=True)
class WorkerSummary:
    """What one worker (one global rank) did in this run.

    Attributes:
        rank: The worker's global rank (``chunk-{rank}-{n}.bin``).
        inputs: Inputs it finished: ``fn`` ran and every sample (or file) it produced is stored.
        samples: Samples written (``optimize``; 0 for ``map``).
        chunks: Chunk files stored in this run (``optimize``; 0 for ``map``).
        files: Files stored in this run (``map``; 0 for ``optimize``).
        bytes: Bytes stored in this run: chunk files as stored (after compression), or ``map``'s files.
            Index files are not counted.
        indexed_chunks: Chunks its partial index lists, those of an interrupted run it resumed included.
    """

    rank: int
    inputs: int = 0
    samples: int = 0
    chunks: int = 0
    files: int = 0
    bytes: int = 0
    indexed_chunks: int = 0


@dataclass(frozen=True)
class RunSummary:
    """The outcome of a successful ``optimize`` or ``map`` call on this node (its return value).

    Every input was accounted for before this exists: a run that lost one raises
    :class:`~litstream.WorkerError` instead. LitData's ``optimize`` and ``map`` return ``None``; code that
    ignores the result is unaffected.

    Attributes:
        inputs: Inputs finished (sequence items after ``batch_size`` grouping and ``fast_dev_run``, or queue
            items), by this node's workers.
        samples: Samples written (``optimize``; 0 for ``map``).
        chunks: Chunk files stored by this run (``optimize``; 0 for ``map``); an append or a resumed run
            counts only its own.
        files: Files stored (``map``; 0 for ``optimize``).
        bytes: Bytes stored by this run, as stored (compressed chunks count compressed); index files excluded.
        seconds: Wall-clock time of the call, from argument checks to the committed ``index.json``.
        output: Where the data went (``Store.url``: an absolute path or a URL).
        workers: One :class:`WorkerSummary` per worker of this node, by rank.
    """

    inputs: int
    samples: int
    chunks: int
    files: int
    bytes: int
    seconds: float
    output: str
    workers: tuple[WorkerSummary, ...]


def summarize(workers: Sequence[WorkerSummary], *, seconds: float, output: str) -> RunSummary:
    """Fold the workers' reports into the run's summary."""
    ordered = tuple(sorted(workers, key=lambda w: w.rank))
    return RunSummary(
        inputs=sum(w.inputs for w in ordered),
        samples=sum(w.samples for w in ordered),
        chunks=sum(w.chunks for w in ordered),
        files=sum(w.files for w in ordered),
        bytes=sum(w.bytes for w in ordered),
        seconds=seconds,
        output=output,
        workers=ordered,
    )
