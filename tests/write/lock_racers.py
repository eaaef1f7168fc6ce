"""Writer processes for the writer-lock tests: each runs one ``optimize``, ``map`` or ``AsyncUploader``.

Started with the ``spawn`` context (a fresh interpreter, never a fork of the threaded pytest process).
Two racers wait on one barrier, then write the same output. A racer's function blocks on ``GATE`` (the
other racer's "done" event) before its first sample, so the run that got the lock still holds it while
the other one tries: the outcome never depends on timing. ``hold`` blocks forever (until SIGKILL).
"""

from __future__ import annotations

import os
import traceback
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

GATE: Any = None
"""The event this racer's samples wait for (the other racer finished), set in the racer process."""

GATE_TIMEOUT = 30.0
"""Seconds a sample waits for the other racer; only reached when both hold the lock (a bug)."""

RUN_SIZE = 6


def inputs_of(run: int) -> list[int]:
    """The inputs of racer ``run``: ``run * 1000 + 0..RUN_SIZE-1`` (so every sample names its run)."""
    return [run * 1000 + i for i in range(RUN_SIZE)]


def sample(i: int) -> dict[str, int]:
    if GATE is not None:
        GATE.wait(GATE_TIMEOUT)
    return {"i": i}


def write_file(i: int, output_dir: str) -> None:
    if GATE is not None:
        GATE.wait(GATE_TIMEOUT)
    Path(output_dir, f"file-{i}.txt").write_text(str(i))


async def _upload(output: str, options: dict[str, Any] | None, mode: str | None, items: list[int]) -> None:
    from litstream import AsyncUploader

    async with AsyncUploader(output, chunk_size=2, mode=mode, storage_options=options) as up:
        for i in items:
            if GATE is not None:
                await anyio.to_thread.run_sync(GATE.wait, GATE_TIMEOUT)
            await up.add({"i": i})


def key_of(run: int, s: dict[str, int]) -> str:
    """The key racer ``run``'s ``build_keys_index`` gives a sample: ``r{run}-{i}`` (so every key names its run)."""
    if GATE is not None:
        GATE.wait(GATE_TIMEOUT)
    return f"r{run}-{s['i']}"


def run_writer(kind: str, run: int, output: str, options: dict[str, Any] | None, mode: str | None) -> None:
    """One write of ``inputs_of(run)`` by ``kind`` (``optimize``, ``map`` or ``uploader``), or, for ``keys``,
    ``build_keys_index`` over the dataset in ``output`` with :func:`key_of` (``overwrite=True``)."""
    import functools

    import litstream

    items = inputs_of(run)
    if kind == "optimize":
        # Locally two forked workers (GATE is inherited; the lease's heartbeat thread is paused around the fork);
        # on S3 the workers would be spawned without GATE, so the run stays in this process.
        workers = 2 if options is None else 1
        litstream.optimize(
            sample, items, output, chunk_size=2, num_workers=workers, mode=mode, storage_options=options, verbose=False
        )
    elif kind == "keys":
        litstream.build_keys_index(
            output, functools.partial(key_of, run), overwrite=True, storage_options=options, verbose=False
        )
    elif kind == "map":
        litstream.map(write_file, items, output, num_workers=1, storage_options=options, verbose=False)
    else:
        anyio.run(_upload, output, options, mode, items)


def racer(
    kind: str,
    run: int,
    output: str,
    options: dict[str, Any] | None,
    mode: str | None,
    barrier: Any,
    done: list[Any],
    results: Any,
) -> None:
    """Wait for the other racer, write, report ``(run, pid, outcome, message)``; set this racer's done event."""
    global GATE
    from litstream import OutputLockedError

    GATE = done[1 - run]
    try:
        barrier.wait(60)
        run_writer(kind, run, output, options, mode)
        results.put((run, os.getpid(), "ok", ""))
    except OutputLockedError as exc:
        results.put((run, os.getpid(), "locked", str(exc)))
    except BaseException as exc:  # reported, so the test shows it
        results.put((run, os.getpid(), "error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))
    finally:
        done[run].set()


def race(kinds: tuple[str, str], location: str, options: dict[str, Any] | None, mode: str | None) -> list[Any]:
    """Run two racers (spawned processes: fresh interpreters) lined up on a barrier; their outcomes."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    done = [ctx.Event(), ctx.Event()]
    procs = [
        ctx.Process(target=racer, args=(kind, run, location, options, mode, barrier, done, results))
        for run, kind in enumerate(kinds)
    ]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=240) for _ in procs]
    for p in procs:
        p.join(60)
    return outcomes


def hold(output: str, options: dict[str, Any] | None, started: Any) -> None:
    """Take the lock by starting an ``optimize`` with checkpoints, report it, then block until killed."""
    global GATE
    import threading

    import litstream

    class _Forever:
        def wait(self, timeout: float) -> None:
            started.set()
            threading.Event().wait()

    GATE = _Forever()
    litstream.optimize(
        sample,
        inputs_of(0),
        output,
        chunk_size=2,
        num_workers=1,
        use_checkpoint=True,
        storage_options=options,
        verbose=False,
    )
