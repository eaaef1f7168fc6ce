"""``optimize``: run a user function over inputs in worker processes and write one dataset.

Flow: validate every argument (nothing is written before that) → split ``inputs`` into contiguous
slices, one per worker, as LitData does in ordered mode (the remainder goes one each to the last
workers) → each worker runs an event loop with a :class:`ChunkWriter` of its own rank → the parent
merges the partial indexes into ``index.json``, written last. Worker processes are started with
``fork`` where that is safe, else ``spawn``; ``fn`` travels with cloudpickle either way, so lambdas
and closures work. A failing worker stops the job: the others are terminated, the files of this run
are removed, and :class:`~litstream.WorkerError` names the input that failed.
"""

from __future__ import annotations

import inspect
import multiprocessing
import os
import queue as queue_module
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import cloudpickle

from .._errors import ConfigurationError, OutputNotEmptyError, WorkerError
from .._sync import run_sync
from ..format._compression import validate_compression
from ..format._index import INDEX_FILENAME, Index, is_partial_index_name
from ..format._loaders import PyTreeLoader
from ..storage._resolver import Dir, store_for
from ._merge import merge_index
from ._writer import ChunkWriter, check_chunking

if TYPE_CHECKING:
    from ..format._serializers import Serializer
    from ..storage._store import Store

__all__ = ["optimize", "split_inputs"]

_MODES = (None, "append", "overwrite")


def split_inputs(num_inputs: int, num_workers: int) -> list[range]:
    """Contiguous input slices per worker: ``num_inputs // num_workers`` each, the remainder one
    each to the **last** workers (LitData's ordered split: 5 inputs, 2 workers → [0, 1], [2, 3, 4])."""
    base, extra = divmod(num_inputs, num_workers)
    out, start = [], 0
    for w in range(num_workers):
        size = base + (1 if w >= num_workers - extra else 0)
        out.append(range(start, start + size))
        start += size
    return out


@dataclass(frozen=True)
class _WorkerJob:
    rank: int
    items: list[Any]
    first_index: int
    fn_pickle: bytes
    store: Store
    writer_kwargs: dict[str, Any]


_REPORT_EVERY_S = 0.1


def _iter_samples(fn: Callable[[Any], Any], item: Any) -> Any:
    result = fn(item)
    if inspect.isgenerator(result):
        yield from result
    elif result is not None:
        yield result


async def _run_job(job: _WorkerJob, report: Callable[[tuple[Any, ...]], None]) -> list[str]:
    fn = cloudpickle.loads(job.fn_pickle)
    writer = ChunkWriter(job.store, rank=job.rank, **job.writer_kwargs)
    done = 0  # inputs finished but not reported yet: progress goes out at most every 0.1 s, not per input
    next_report = time.monotonic() + _REPORT_EVERY_S
    try:
        async with writer:
            for offset, item in enumerate(job.items):
                index = job.first_index + offset
                try:
                    samples = list(_iter_samples(fn, item))
                except Exception as exc:
                    raise WorkerError(
                        f"fn failed on input {item!r} (index {index}, worker {job.rank}): {type(exc).__name__}: {exc}"
                    ) from exc
                for sample in samples:
                    try:
                        await writer.add(sample)
                    except Exception as exc:
                        raise WorkerError(
                            f"cannot write the sample from input {item!r} (index {index}, worker {job.rank}): "
                            f"{type(exc).__name__}: {exc}"
                        ) from exc
                done += 1
                if time.monotonic() >= next_report:
                    report(("progress", job.rank, done))
                    done, next_report = 0, time.monotonic() + _REPORT_EVERY_S
    finally:
        if done:
            report(("progress", job.rank, done))
        report(("files", job.rank, list(writer.written_files)))
    return writer.written_files


def _worker_main(job_bytes: bytes, events: Any) -> None:
    job: _WorkerJob = cloudpickle.loads(job_bytes)
    try:
        run_sync(_run_job, job, events.put)
    except BaseException as exc:
        events.put(("error", job.rank, f"{type(exc).__name__}: {exc}", traceback.format_exc()))
    else:
        events.put(("done", job.rank))


def optimize(
    fn: Callable[[Any], Any],
    inputs: Sequence[Any],
    output_dir: str | os.PathLike[str] | Dir | Store,
    chunk_size: int | None = None,
    chunk_bytes: int | str | None = None,
    compression: str | None = None,
    num_workers: int | None = None,
    mode: str | None = None,
    item_loader: PyTreeLoader | None = None,
    serializers: Mapping[str, Serializer] | None = None,
    start_method: str | None = None,
    verbose: bool = True,
    storage_options: Mapping[str, Any] | None = None,
) -> None:
    """Apply ``fn`` to every input and write the samples as a LitData-format dataset.

    Args:
        fn: ``fn(input) -> sample`` (``None`` results are skipped) or a generator function yielding
            any number of samples per input. A sample is any pytree of supported leaves (see
            ``litstream.format``); the first sample fixes the format.
        inputs: A non-empty sequence; worker ``w`` gets a contiguous slice.
        output_dir: Local directory (created if missing), ``Dir``, or a ``Store``.
        chunk_size: Items per chunk. Give exactly one of ``chunk_size`` / ``chunk_bytes``.
        chunk_bytes: Payload bytes per chunk: an int, or a string with decimal units (``"64MB"``).
        compression: ``None``, ``"zstd"`` (level 4) or ``"zstd:N"`` (N in 1..22).
        num_workers: Worker processes (default ``os.cpu_count()``); 1 runs in this process.
        mode: ``None`` (the output must hold no files), ``"overwrite"`` (remove a previous
            dataset's files first) or ``"append"`` (add chunks after an existing dataset's; the new
            samples must have the same format).
        item_loader: ``PyTreeLoader()`` (default).
        serializers: Extra serializers by registry key, tried before the built-ins.
        start_method: Multiprocessing start method. Default: ``"fork"`` where available and safe
            (this process has not used obstore, which hangs in forked children), else ``"spawn"``.
        verbose: Show a tqdm progress bar.
        storage_options: Credentials and client options when ``output_dir`` is an object-store URL
            (``s3://``, ``gs://``, ``azure://``); chunks are uploaded as they are written and
            ``index.json`` last.

    Raises:
        ConfigurationError: a bad argument; raised before anything is written.
        OutputNotEmptyError: ``output_dir`` already holds files and ``mode`` is ``None``.
        WorkerError: ``fn`` or the writer failed in a worker; names the input. No ``index.json``
            is written and the chunk files of this run are removed.
        FormatError: (via WorkerError's cause) a sample cannot be encoded.
    """
    if not callable(fn):
        raise ConfigurationError(f"fn must be callable, got {fn!r}")
    if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence) or len(inputs) == 0:
        raise ConfigurationError(
            f"inputs must be a non-empty sequence (list, tuple, range), got {type(inputs).__name__} {inputs!r:.80}"
        )
    chunk_size, chunk_bytes_int = check_chunking(chunk_size, chunk_bytes)
    validate_compression(compression)
    if mode not in _MODES:
        raise ConfigurationError(f"mode must be None, 'append' or 'overwrite', got {mode!r}")
    if num_workers is None:
        num_workers = os.cpu_count() or 1
    if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
        raise ConfigurationError(f"num_workers must be a non-negative int, got {num_workers!r}")
    num_workers = max(num_workers, 1)
    if item_loader is not None and not isinstance(item_loader, PyTreeLoader):
        raise ConfigurationError(f"item_loader={item_loader!r} is not supported yet; use PyTreeLoader()")
    if start_method is not None and start_method not in multiprocessing.get_all_start_methods():
        raise ConfigurationError(
            f"start_method={start_method!r} is not available here; use one of {multiprocessing.get_all_start_methods()}"
        )
    try:
        fn_pickle = cloudpickle.dumps(fn)
    except Exception as exc:
        raise ConfigurationError(f"fn={fn!r} cannot be sent to worker processes: {exc}") from exc

    store = store_for(output_dir, storage_options, argument="output_dir")
    existing, start_chunks = run_sync(_prepare_output, store, mode, num_workers)
    writer_kwargs: dict[str, Any] = {
        "chunk_size": chunk_size,
        "chunk_bytes": chunk_bytes_int,
        "compression": compression,
        "serializers": serializers,
        "item_loader": item_loader,
    }
    slices = split_inputs(len(inputs), num_workers)
    jobs = [
        _WorkerJob(
            rank=rank,
            items=[inputs[i] for i in slices[rank]],
            first_index=slices[rank].start,
            fn_pickle=fn_pickle,
            store=store,
            writer_kwargs={**writer_kwargs, "start_chunk": start_chunks.get(rank, 0)},
        )
        for rank in range(num_workers)
    ]
    _run_jobs(jobs, len(inputs), store, start_method or _default_start_method(), verbose)
    run_sync(_finish, store, existing)


def _default_start_method() -> str:
    """``fork`` where it is safe (POSIX, and this process has not used obstore), else ``spawn``."""
    from ..storage._store import obstore_used

    if "fork" in multiprocessing.get_all_start_methods() and not obstore_used():
        return "fork"
    return "spawn"


async def _prepare_output(store: Store, mode: str | None, num_workers: int) -> tuple[Index | None, dict[int, int]]:
    listing = await store.list()
    if mode is None:
        if listing:
            names = ", ".join(m.path for m in listing[:3])
            raise OutputNotEmptyError(
                f"output_dir {store.url} is not empty (holds {names}{', ...' if len(listing) > 3 else ''}); "
                "pass mode='overwrite' to replace it, mode='append' to add to it, or choose an empty directory"
            )
        return None, {}
    if mode == "overwrite":
        for meta in listing:
            name = meta.path
            if "/" not in name and (
                name == INDEX_FILENAME
                or is_partial_index_name(name)
                or (name.startswith("chunk-") and name.endswith(".bin"))
            ):
                await store.delete(name)
        return None, {}
    # append
    present = {m.path for m in listing}
    if INDEX_FILENAME not in present:
        return None, {}
    existing = Index.from_json(await store.get(INDEX_FILENAME))
    start: dict[int, int] = {}
    for chunk in existing.chunks:
        parts = chunk.filename.split(".")[0].split("-")
        if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
            rank, number = int(parts[1]), int(parts[2])
            start[rank] = max(start.get(rank, 0), number + 1)
    return existing, start


async def _finish(store: Store, existing: Index | None) -> None:
    await merge_index(store, existing=existing)


def _run_jobs(jobs: list[_WorkerJob], total: int, store: Store, start_method: str, verbose: bool) -> None:
    from tqdm.auto import tqdm

    bar = tqdm(total=total, desc="Optimizing", unit="input", disable=not verbose)
    written: list[str] = []
    try:
        if len(jobs) == 1:
            queue_module.SimpleQueue()

            def report(event: tuple[Any, ...]) -> None:
                if event[0] == "progress":
                    bar.update(event[2])
                elif event[0] == "files":
                    written.extend(event[2])

            try:
                run_sync(_run_job, jobs[0], report)
            except BaseException:
                run_sync(_remove, store, written)
                raise
            return
        _run_processes(jobs, store, start_method, bar, written)
    finally:
        bar.close()


def _run_processes(jobs: list[_WorkerJob], store: Store, start_method: str, bar: Any, written: list[str]) -> None:
    ctx: Any = multiprocessing.get_context(start_method)
    events = ctx.Queue()
    processes = [ctx.Process(target=_worker_main, args=(cloudpickle.dumps(job), events), daemon=True) for job in jobs]
    for p in processes:
        p.start()
    pending = {job.rank for job in jobs}
    failure: tuple[Any, ...] | None = None
    try:
        while pending and failure is None:
            try:
                event = events.get(timeout=1.0)
            except queue_module.Empty:
                dead = [jobs[i].rank for i, p in enumerate(processes) if not p.is_alive() and jobs[i].rank in pending]
                if dead and events.empty():
                    failure = (
                        "error",
                        dead[0],
                        f"worker {dead[0]} died (exit code "
                        f"{processes[jobs.index(next(j for j in jobs if j.rank == dead[0]))].exitcode})",
                        "",
                    )
                continue
            kind = event[0]
            if kind == "progress":
                bar.update(event[2])
            elif kind == "files":
                written.extend(event[2])
            elif kind == "done":
                pending.discard(event[1])
            elif kind == "error":
                failure = event
    finally:
        if failure is not None:
            for p in processes:
                if p.is_alive():
                    p.terminate()
        for p in processes:
            p.join()
        while not events.empty():
            event = events.get()
            if event[0] == "files":
                written.extend(event[2])
    if failure is not None:
        run_sync(_remove, store, written)
        _, rank, message, tb = failure
        raise WorkerError(f"optimize worker {rank} failed: {message}\n{tb}")


async def _remove(store: Store, names: list[str]) -> None:
    for name in names:
        await store.delete(name)
    for meta in await store.list():
        if is_partial_index_name(meta.path):
            await store.delete(meta.path)
