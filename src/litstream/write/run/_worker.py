"""One optimize worker: run ``fn`` over its inputs and write chunks with a ChunkWriter of its own rank.

A job is a picklable value (it travels to a worker process, or to an executor's worker, with
cloudpickle, so lambdas and closures work); :meth:`OptimizeJob.run` is its whole life. With
``use_checkpoint`` the job saves a :class:`~._checkpoint.WorkerCheckpoint` after every stored chunk and
starts from one on a re-run (see :mod:`._checkpoint`).
"""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import anyio
import cloudpickle

from ..._core._errors import WorkerError
from ...format._index import Index
from ...format._loaders import SampleDecoder
from .._checkpoint import CommitTracker, WorkerCheckpoint, checkpoint_name
from .._keys import KeyRecorder
from .._summary import WorkerSummary
from .._writer import ChunkWriter, EncodedSample
from ._feed import run_ahead
from ._sequence_feed import job_inputs

if TYPE_CHECKING:
    from ...format._index import ChunkInfo
    from ...storage._store import Store

__all__ = ["OptimizeJob", "Report", "iter_samples"]

_REPORT_EVERY_S = 0.1
"""Seconds between a worker's progress reports (one per input would flood the queue)."""

Report = Callable[[tuple[Any, ...]], None]
"""How a job tells its runner about progress: ``("progress", rank, inputs_finished)``."""


class _EncodeFailed(Exception):
    """Carries a failure of encoding a sample out of ``fn``'s loop (to tell it from a failure of ``fn``)."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


def iter_samples(fn: Callable[[Any], Any], item: Any) -> Iterator[Any]:
    """The samples ``fn(item)`` gives: a generator's non-None yields, or the result unless it is None."""
    result = fn(item)
    if inspect.isgenerator(result):
        for sample in result:
            if sample is not None:
                yield sample
    elif result is not None:
        yield result


@dataclass(frozen=True)
class OptimizeJob:
    """The work of one optimize worker.

    Attributes:
        rank: Global rank; names the chunk files (``chunk-{rank}-{n}.bin``) and the partial index.
        items: This worker's inputs in processing order (a :class:`~._inputs.Picked` view), or ``None`` to
            pull from the queue or the :class:`~._sequence_feed.FedBatches` given to :meth:`run`.
        positions: Position of each item in the user's ``inputs`` (for error messages).
        fn_pickle: ``fn``, cloudpickled.
        store: The output location.
        writer_kwargs: ChunkWriter arguments (chunking, compression, serializers, item loader, start_chunk).
        checkpoint: ``None`` without ``use_checkpoint``; else where this worker stands (an empty one on a
            first run).
        queue_timeout: Seconds without a queue item after which a queue input counts as finished.
        key_fn_pickle: ``key_fn`` cloudpickled, or ``None``: the keys go to ``{rank}.keys.parquet``.
    """

    rank: int
    items: Sequence[Any] | None
    positions: Sequence[int]
    fn_pickle: bytes
    store: Store
    writer_kwargs: dict[str, Any]
    checkpoint: WorkerCheckpoint | None = None
    queue_timeout: float = 300.0
    key_fn_pickle: bytes | None = None

    @property
    def num_inputs(self) -> int | None:
        """Inputs this job still has to process (``None`` for a queue)."""
        if self.items is None:
            return None
        return len(self.items) - self.first_input

    @property
    def first_input(self) -> int:
        """Offset in ``items`` of the first input still to process (after a checkpoint's ``inputs_done``)."""
        return self.checkpoint.inputs_done if self.checkpoint is not None else 0

    def without_inputs(self) -> OptimizeJob:
        """This job for a worker process: its inputs come through a :class:`~._sequence_feed.FedBatches`."""
        return replace(self, items=None, positions=())

    async def run(self, report: Report, source: Any = None) -> WorkerSummary:
        """Process every input; returns what was done, or raises :class:`WorkerError` naming the input that failed.

        ``fn`` runs in a worker thread, a batch of inputs ahead of the writer (see :mod:`._feed`), so the
        uploads on this loop go on while it computes.
        """
        fn = cloudpickle.loads(self.fn_pickle)
        ckpt = self.checkpoint
        tracker = CommitTracker(ckpt) if ckpt is not None else None
        kwargs = dict(self.writer_kwargs)
        resume: Index | None = None
        if ckpt is not None and ckpt.chunks:
            resume = Index(chunks=ckpt.chunks, config=ckpt.config)
            kwargs["start_chunk"] = ckpt.next_chunk_index
        next_number = kwargs.get("start_chunk", 0)
        stored = anyio.Event()

        async def on_commit(chunk: ChunkInfo) -> None:
            nonlocal next_number, stored
            assert tracker is not None
            next_number += 1
            state = tracker.committed(chunk, next_number, writer.config())
            await self.store.put(checkpoint_name(self.rank), state.to_json().encode())
            stored.set()
            stored = anyio.Event()

        async def wait_committed() -> None:
            # With checkpoints, a closed chunk is stored (and its checkpoint saved) before the next
            # input is written: the checkpoint then trails fn by less than one chunk, whatever fn does.
            while next_number < writer.next_chunk_index:
                await stored.wait()

        writer = ChunkWriter(
            self.store, rank=self.rank, resume=resume, on_commit=on_commit if tracker else None, **kwargs
        )
        keys = KeyRecorder(cloudpickle.loads(self.key_fn_pickle)) if self.key_fn_pickle is not None else None
        if keys is not None and resume is not None and resume.config is not None:
            decoder = SampleDecoder(resume.config, kwargs.get("serializers"))
            await keys.resume(self.store, self.rank, resume, decoder.decode)
        skip = ckpt.samples_skip if ckpt is not None else 0
        finished = 0
        done = 0  # inputs finished but not reported yet: progress goes out at most every 0.1 s, not per input
        next_report = time.monotonic() + _REPORT_EVERY_S

        def call(item: Any, where: str, last: bool) -> list[tuple[EncodedSample, str | int | None]]:
            # In fn's thread: each sample is encoded as soon as fn made it, as LitData does, so a fn that
            # reuses its dict or array for the next input cannot change samples waiting for the writer.
            encoded = []
            try:
                for sample in iter_samples(fn, item):
                    try:
                        key = keys.key_of(sample, where) if keys is not None else None
                        encoded.append((writer.encode(sample), key))
                    except Exception as exc:
                        raise _EncodeFailed(exc) from exc
            except _EncodeFailed as failed:
                error = failed.error
                raise WorkerError(
                    f"cannot write the sample from input {item!r:.200} ({where}, worker {self.rank}): "
                    f"{type(error).__name__}: {error}"
                ) from error
            except Exception as exc:
                raise WorkerError(
                    f"fn failed on input {item!r:.200} ({where}, worker {self.rank}): {type(exc).__name__}: {exc}"
                ) from exc
            return encoded

        async def handle(item: Any, where: str, samples: list[tuple[EncodedSample, str | int | None]]) -> None:
            nonlocal skip, finished, done, next_report
            if tracker is not None:
                tracker.start_input()
                tracker.add_samples(len(samples))
            for sample, key in samples[skip:]:
                try:
                    if keys is not None:
                        keys.record(key, where)
                    await writer.add_encoded(sample)
                except Exception as exc:
                    raise WorkerError(
                        f"cannot write the sample from input {item!r:.200} ({where}, worker {self.rank}): "
                        f"{type(exc).__name__}: {exc}"
                    ) from exc
            skip = 0
            if tracker is not None:
                tracker.end_input()
                await wait_committed()
            finished += 1
            done += 1
            if time.monotonic() >= next_report:
                report(("progress", self.rank, done))
                done, next_report = 0, time.monotonic() + _REPORT_EVERY_S

        halt = threading.Event()
        try:
            async with writer:
                await run_ahead(job_inputs(self, source, halt), call, handle, halt)
        finally:
            if done:
                report(("progress", self.rank, done))
        if keys is not None:
            await keys.save(self.store, self.rank)
        partial = writer.partial_index
        return WorkerSummary(
            rank=self.rank,
            inputs=finished,
            samples=writer.num_samples,
            chunks=writer.chunks_written,
            bytes=writer.bytes_written,
            indexed_chunks=0 if partial is None else len(partial.chunks),
        )
