"""``optimize``: run a user function over inputs in worker processes and write one dataset.

Flow: validate every argument (nothing is written before that; checks shared with ``map`` live in
:mod:`._args`) → split ``inputs`` over ``num_nodes x num_workers`` workers (:mod:`._inputs`; nodes
from ``DATA_OPTIMIZER_*``, :mod:`._env`) →
check and prepare the output for ``mode`` / ``use_checkpoint`` (:mod:`._output`) → run one
:class:`~._worker.OptimizeJob` per worker in this process, in worker processes or on an executor
(:mod:`._runner`) → merge the partial indexes, across nodes if several (:mod:`._nodes`); ``index.json``
is written last. A failing worker stops the job with :class:`~litstream.WorkerError` naming the input;
without ``use_checkpoint`` the files of this run are removed, with it they stay and a re-run resumes.
"""

from __future__ import annotations

import functools
import sys
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import anyio

from .._core._bridge import run_sync
from .._core._crash import crash_point
from .._core._errors import ConfigurationError, OutputLockedError
from ..format._checksum import check_checksum_argument
from ..format._compression import resolve_compression
from ..format._encrypted import check_writer_encryption
from ..format._loaders import PyTreeLoader, TokensLoader
from ..format._trust_marker import untrusted_sources
from ..format.arrow._chunk import pyarrow_module
from ..format.arrow._write import check_chunk_format
from ..read.source._versions import VersionLog
from ..storage._files import remove_stale_temporaries
from ._args import (
    check_align_chunking,
    check_start_method,
    output_store,
    pick_start_method,
    pickle_fn,
    plan_inputs,
)
from ._checkpoint import RunConfig, inputs_digest
from ._chunk_pack import check_chunking
from ._keys import check_append_keys, keys_hook
from ._output import prepare_output
from ._params import start_write
from ._run_end import discard_run, finish_run
from ._summary import summarize
from ._untrusted import marking_hook, reader_sources
from ._writer_lock import WriterLock
from .run._inputs import Picked, split_inputs
from .run._jobs import build_jobs
from .run._nodes import finish_node
from .run._runner import run_jobs

if TYPE_CHECKING:
    import concurrent.futures
    import os
    from collections.abc import Callable, Mapping, Sequence

    from ..format._encryption import Encryption
    from ..format._serializers import Serializer
    from ..storage._resolver import Dir
    from ..storage._store import Store
    from ._summary import RunSummary

__all__ = ["optimize", "split_inputs"]

_MODES = (None, "append", "overwrite")


def optimize(
    fn: Callable[[Any], Any],
    inputs: Sequence[Any] | Any = None,
    output_dir: str | os.PathLike[str] | Dir | Store = "optimized_data",
    *,
    queue: Any = None,
    input_dir: str | os.PathLike[str] | Dir | None = None,
    weights: Sequence[float] | None = None,
    chunk_size: int | None = None,
    chunk_bytes: int | str | None = None,
    compression: str | None = None,
    compression_level: str | None = None,
    compression_batch_size: int | None = None,
    num_workers: int | None = None,
    fast_dev_run: bool | int = False,
    reorder_files: bool = True,
    batch_size: int | None = None,
    mode: str | None = None,
    use_checkpoint: bool = False,
    item_loader: PyTreeLoader | TokensLoader | None = None,
    serializers: Mapping[str, Serializer] | None = None,
    start_method: str | None = None,
    executor: concurrent.futures.Executor | None = None,
    storage_options: Mapping[str, Any] | None = None,
    verbose: bool = True,
    checksum: str | None = "xxh3",
    encryption: Encryption | None = None,
    chunk_format: str | None = None,
    align_chunking: bool = False,
    num_nodes: int | None = None,
    machine: Any = None,
    num_downloaders: int | None = None,
    num_uploaders: int | None = None,
    reader: Any = None,
    optimize_dns: bool | None = None,
    keep_data_ordered: bool | None = None,
    broadcast_paths: bool = False,
    key_fn: Callable[[Any], Any] | None = None,
    allow_pickle: bool = True,
) -> RunSummary:
    """Apply ``fn`` to every input and write the samples as a LitData-format dataset.

    Matches LitData's ``optimize`` for the arguments it shares (names, defaults, the ordered input split,
    file names, ``DATA_OPTIMIZER_*`` nodes); see ``docs/environment.md`` for the environment.

    Args:
        fn: ``fn(input) -> sample`` (``None`` results are skipped) or a generator function yielding
            any number of samples per input. A sample is any pytree of supported leaves (see
            ``litstream.format``); the first sample fixes the format.
        inputs: A non-empty sequence (worker ``w`` of node ``k`` gets slice ``k·num_workers + w``), or a
            ``queue.Queue`` / ``multiprocessing.Queue`` that a producer ends with the string ``"ALL_DONE"``
            (or by ``DATA_OPTIMIZER_TIMEOUT`` seconds, default 300, of silence), or a
            ``StreamingDataLoader``: each batch of one epoch is one input (LitData's; see
            ``write.run._loader_inputs``).
        output_dir: Local directory (created if missing), URL (``s3://``, ``gs://``, ``azure://``), ``Dir``
            or ``Store``. Default ``"optimized_data"`` as LitData.
        queue: LitData's name for a queue input; give ``inputs`` or ``queue``.
        input_dir: Local directory holding the files the inputs name; with ``reorder_files`` the inputs
            are balanced across workers by the bytes of those files.
        weights: One positive number per input; workers get bins of about equal total weight (greedy
            packing, heaviest first), each bin in input order.
        chunk_size: Items per chunk. Give exactly one of ``chunk_size`` / ``chunk_bytes``.
        chunk_bytes: Payload bytes per chunk: an int, or a string with decimal units (``"64MB"``).
        compression: ``None``, ``"zstd"`` (level 4) or ``"zstd:N"`` (N in 1..22).
        compression_level: What one zstd frame holds: ``"chunk"`` (default: the whole file,
            ``chunk-R-N.zstd.bin``, readable by every LitData version), ``"batch"`` (frames of
            ``compression_batch_size`` items inside ``chunk-R-N.bin``, LitData 0.2.76's default) or
            ``"sample"`` (one frame per item). ``"batch"`` and ``"sample"`` need LitData >= 0.2.76 to read.
        compression_batch_size: Items per frame for ``"batch"`` (default 256).
        num_workers: Workers per node (default ``os.cpu_count()``; 0 counts as 1). One worker without an
            executor runs in this process.
        fast_dev_run: ``True`` keeps the first 10 inputs of every worker, an int that many; ``False``
            (default) processes everything.
        reorder_files: Balance by file sizes under ``input_dir`` (default True; no effect without it).
        batch_size: Group inputs into lists of this many; ``fn`` gets a list.
        mode: ``None`` (the output must hold no files), ``"overwrite"`` (remove a previous dataset,
            sidecars and checkpoints included) or ``"append"`` (add chunks after an existing dataset's;
            the new samples must have the same format).
        use_checkpoint: Save each worker's progress after every stored chunk under ``.checkpoints/``; a run
            that was killed or failed is completed by calling ``optimize`` again with the same arguments,
            every input landing in the dataset exactly once. ``fn`` must be deterministic. Checkpoints
            are deleted after success.
        item_loader: ``PyTreeLoader()`` (default), or ``TokensLoader()`` when every sample is one
            1-D token array (then ``chunk_size`` counts tokens; see :class:`~litstream.TokensLoader`).
        serializers: Extra serializers by registry key, tried before the built-ins.
        start_method: Multiprocessing start method. Default: the one the program set with
            ``multiprocessing.set_start_method``, else ``"fork"`` where available and safe (this process
            has not used obstore, whose threads a fork would not copy), else ``"spawn"``.
        executor: Any ``concurrent.futures.Executor`` (a Dask ``Client.get_executor()``, Ray's, a
            ``ProcessPoolExecutor``) to run the per-worker jobs on instead of our processes; each job
            writes straight to ``output_dir``, which its workers must reach.
        storage_options: Credentials and client options when ``output_dir`` is an object-store URL;
            chunks are uploaded as they are written and ``index.json`` last.
        verbose: Show a tqdm progress bar and print (stderr, beside the bar) the workers started, their
            end and what was written, as LitData does.
        checksum: ``"xxh3"`` (default: fast, about 20 GB/s per core), ``"sha256"`` or ``"blake2b"``: record each
            chunk file's digest in ``index.json`` (under a key LitData ignores); litstream's readers verify it
            when a chunk is downloaded or first opened in a process, drop and download again a corrupt cached
            copy, and raise ``ChecksumError`` naming a corrupt chunk. ``None`` records none (as LitData).
        encryption: ``FernetEncryption(password, level)`` or ``RSAEncryption(password, level)``
            (LitData's): encrypt each item (``level="sample"``) or each chunk (``"chunk"``), before
            any compression; ``index.json`` records the algorithm and level, never the key. Save the
            key file (``encryption.save(path)``): reading needs it. See ``docs/format.md``.

        chunk_format: ``None`` (default): LitData 0.2.76's choice. Without ``compression`` and ``encryption``,
            dict samples of ``None``/``bool``/``int``/``float``/``str``/``bytes``, lists and nested dicts of
            those (each field keeping one type) are written as LitData's Arrow chunks when pyarrow is
            installed (see ``docs/format.md``); from the first sample that is not such a dict on (or without
            pyarrow), the pytree layout. ``"pytree"``: always the pytree layout (what litstream wrote by
            default before). ``"arrow"``: always Arrow chunks (a sample that cannot be one raises; needs
            pyarrow, ``pip install "litstream[arrow]"``); with ``compression`` the Arrow buffers are
            compressed (``config.ipc_compression``) and file names keep ``.bin``.
        align_chunking: LitData's single-worker chunk layout: with ``True`` (needs ``chunk_size`` and a
            sequence of inputs) every worker but the last writes the same number of whole chunks and the
            last one the rest, so that, with one sample per input, the chunks are those ``num_workers=1``
            writes. Default ``False``.
        reader: LitData's input reader (``ParquetReader(...)`` or a ``BaseReader`` subclass): the inputs
            become ``reader.remap_items(inputs, num_workers)`` and ``fn`` gets ``reader.read(item)``.
        num_nodes, machine, broadcast_paths: LitData's Lightning-job switches; only their defaults
            (``None``, ``None``, ``False``), else ``ConfigurationError``.
        num_downloaders, num_uploaders, optimize_dns: LitData's I/O tuning (``None`` or an int >= 1; a
            bool): accepted without effect (``optimize_dns`` only matters on Lightning AI).
        keep_data_ordered: ``None``, ``True`` or ``False``, without effect: litstream always gives each
            worker its slice in input order, which is what LitData's ``True`` promises.
        key_fn: ``key_fn(sample) -> str | int``, a sample's own id (LitData 0.2.76's argument). Writes the
            ``keys/`` sidecar (``keys/shard-00000.parquet``, see ``docs/keys.md``) so that ``ds["id"]`` and
            ``ds.get_by_key(id)`` find a sample by it and ``dataset_update`` can replace it. Keys must be
            unique across the dataset (append and resumed runs included) and all of one type; needs
            pyarrow. In append mode the dataset must already have a sidecar exactly when ``key_fn`` is given.
        allow_pickle: ``False`` refuses samples with a leaf only ``pickle`` can store
            (:class:`~litstream.PickleRefusedError`, raised as a ``WorkerError``'s cause), so the
            dataset can be read with ``allow_pickle=False``. Default ``True`` (LitData's behaviour).

    Returns:
        A :class:`~litstream.RunSummary` of this node's work: inputs finished, samples, chunk files, bytes
        stored, seconds. LitData returns ``None``; code that ignores the result is unaffected.

    Raises:
        ConfigurationError: a bad argument or ``DATA_OPTIMIZER_*`` value; raised before anything is
            written. Also when checkpoints were made by a different run.
        OutputNotEmptyError: ``output_dir`` already holds files and ``mode`` is ``None``.
        OutputLockedError: another ``optimize``, ``map`` or ``AsyncUploader`` is writing ``output_dir`` (raised
            at once, naming it: run id, host, pid, start), or, at commit, this run lost its writer lock or
            ``index.json`` was changed by another writer meanwhile (nothing committed). See ``docs/storage.md``.
        WorkerError: an input was lost: ``fn`` or the writer failed in a worker (names the input and
            chains the worker's exception), a worker process died, an executor task was cancelled, a queue
            input raised or held an item that cannot be pickled. No ``index.json`` is written (in append
            mode the previous one stays as it was); without ``use_checkpoint`` this run's files are
            removed, with it they stay for a re-run. See ``docs/write.md``.
        StorageError: on N nodes, the last node waited ``DATA_OPTIMIZER_TIMEOUT`` s for another node.
    """
    started = time.monotonic()
    fn_pickle, inputs = start_write(  # the LitData-only arguments optimize and map share, checked once
        fn,
        inputs,
        num_workers,
        num_nodes=num_nodes,
        machine=machine,
        num_downloaders=num_downloaders,
        num_uploaders=num_uploaders,
        reader=reader,
        optimize_dns=optimize_dns,
        keep_data_ordered=keep_data_ordered,
        broadcast_paths=broadcast_paths,
        align_chunking=align_chunking,
        item_loader=item_loader,
    )
    chunk_size, chunk_bytes_int = check_chunking(chunk_size, chunk_bytes)
    resolve_compression(compression, compression_level, compression_batch_size, default_level="chunk")
    compression_args = {
        "compression": compression,
        "compression_level": compression_level,
        "compression_batch_size": compression_batch_size,
    }
    check_checksum_argument(checksum)
    check_writer_encryption(encryption, item_loader)
    if mode not in _MODES:
        raise ConfigurationError(f"mode must be None, 'append' or 'overwrite', got {mode!r}")
    if item_loader is not None and not isinstance(item_loader, (PyTreeLoader, TokensLoader)):
        raise ConfigurationError(f"item_loader={item_loader!r} is not supported; use PyTreeLoader() or TokensLoader()")
    if not isinstance(use_checkpoint, bool):
        raise ConfigurationError(f"use_checkpoint must be True or False, got {use_checkpoint!r}")
    if not isinstance(allow_pickle, bool):
        raise ConfigurationError(f"allow_pickle must be True or False, got {allow_pickle!r}")
    check_start_method(start_method)
    if check_chunk_format(chunk_format) == "arrow":
        if isinstance(item_loader, TokensLoader):
            raise ConfigurationError("chunk_format='arrow' stores dict samples; it cannot be used with TokensLoader()")
        pyarrow_module()  # fail now, naming the extra, rather than in a worker
    untrusted = reader_sources(inputs)  # before a loader becomes a queue: trust travels (write/_untrusted.py)
    plan, num_workers = plan_inputs(
        inputs,
        queue,
        num_workers=num_workers,
        weights=weights,
        reorder_files=reorder_files,
        input_dir=input_dir,
        fast_dev_run=fast_dev_run,
        batch_size=batch_size,
        executor=executor,
        use_checkpoint=use_checkpoint,
        align=check_align_chunking(align_chunking, chunk_size),
    )
    if key_fn is not None and not callable(key_fn):
        raise ConfigurationError(f"key_fn must be a callable sample -> str | int, got {key_fn!r:.80}")
    key_fn_pickle = None if key_fn is None else pickle_fn(key_fn)
    store = output_store(output_dir, storage_options)
    env = plan.env
    # Taken before anything in the output changes; given back however the run ends (see _writer_lock).
    lock = WriterLock(store, "optimize", node_rank=env.node_rank, num_nodes=env.num_nodes).acquire()
    done = False
    try:
        if mode == "append":
            run_sync(check_append_keys, store, key_fn is not None)
        assignment = plan.assignment
        run_config = None
        if use_checkpoint:
            assert plan.items is not None
            items = plan.items
            run_config = RunConfig(
                num_nodes=plan.env.num_nodes,
                num_workers=num_workers,
                global_ranks=tuple(assignment.global_ranks),
                inputs=tuple(inputs_digest(Picked(items, p)) for p in assignment.positions),
            )
        # A killed run's leftovers go first (on a node of several: when its own previous run died, or when
        # mode="overwrite" redoes its share; never the finished share of a job whose last node may merge it now).
        sweep = lock.sweep if env.num_nodes == 1 or lock.took_over_dead or mode == "overwrite" else None
        prepare = functools.partial(prepare_output, sweep=sweep)
        prepared = run_sync(prepare, store, mode, assignment.global_ranks, plan.env, run_config)
        crash_point("run:prepared")  # the lease is held, the output prepared, no chunk written yet
        base = None if env.num_nodes == 1 else run_sync(anyio.to_thread.run_sync, VersionLog(store).head_digest)
        if plan.env.num_nodes == 1:  # on N nodes, every node's overwrite removes index.json: no fixed base
            lock.note_index()
        jobs = build_jobs(
            plan, prepared, fn_pickle, store, chunk_size, chunk_bytes_int, compression_args, item_loader, serializers
        )
        jobs = [replace(job, writer_kwargs={**job.writer_kwargs, "checksum": checksum}) for job in jobs]
        if encryption is not None:
            for job in jobs:
                job.writer_kwargs["encryption"] = encryption
        if chunk_format is not None:
            for job in jobs:
                job.writer_kwargs["chunk_format"] = chunk_format
        if key_fn_pickle is not None:
            jobs = [replace(job, key_fn_pickle=key_fn_pickle) for job in jobs]
        before_index = None if key_fn is None else run_sync(keys_hook, store, prepared.existing)
        if prepared.existing is not None:
            untrusted += untrusted_sources(prepared.existing.extra)  # appending to a marked dataset keeps the mark
        if untrusted:
            before_index = marking_hook(before_index, untrusted)
        if not allow_pickle:
            for job in jobs:
                job.writer_kwargs["allow_pickle"] = False
        total = None if plan.items is None else sum(job.num_inputs or 0 for job in jobs)
        try:
            workers = run_jobs(
                jobs,
                total=total,
                num_workers=num_workers,
                start_method=pick_start_method(start_method),
                executor=executor,
                source=plan.source,
                queue_timeout=plan.env.timeout,
                verbose=verbose,
                abort=lambda: lock.lost,  # a lost lease stops the workers at once (see _writer_lock)
            )
            if plan.env.num_nodes == 1:  # a killed worker (or a Dask task run again) may have left a temporary
                remove_stale_temporaries(store, ("",))
            expected = {w.rank: w.indexed_chunks for w in workers}
            run_sync(
                finish_node,
                store,
                assignment.global_ranks,
                plan.env,
                prepared.existing,
                use_checkpoint,
                expected,
                before_index,
                lock.acommit_index,
                base,
            )
        except BaseException as exc:
            if not use_checkpoint and not isinstance(exc, OutputLockedError):  # never delete another run's files
                run_sync(discard_run, store, assignment.global_ranks, prepared)
            raise
        run_sync(
            finish_run, store, assignment.global_ranks, plan.env, prepared, use_checkpoint, before_index, lock, base
        )
        done = True
    finally:
        if not done or env.num_nodes == 1:
            lock.release()
        elif env.is_last_node:
            lock.release_run()
        else:
            lock.hand_over(env.timeout)
    summary = summarize(workers, seconds=time.monotonic() - started, output=store.url)
    if verbose:
        print(
            f"optimize: wrote {summary.samples} samples in {summary.chunks} chunks to {summary.output} "
            f"in {summary.seconds:.1f} s",
            file=sys.stderr,
            flush=True,
        )
    return summary
