"""The profiling arguments of ``StreamingDataLoader`` (LitData 0.2.76's), and what its workers set up first.

LitData's ``profile_batches`` runs viztracer in DataLoader worker 0 of rank 0 and writes
``result.json`` (Chrome trace JSON) to ``profile_dir``; litstream does the same with
``torch.profiler`` (CPU activity), which needs nothing beyond torch. ``profile_cprofile`` writes stdlib
cProfile statistics of the main process and of worker 0 (``cprofile_main.prof``/``.txt`` and
``cprofile_worker0.prof``/``.txt``), as LitData's.

Counting: worker 0 counts the batches it has built (in the loader's collate function, which runs in
the worker). ``profile_batches=N`` (an int) records from the end of batch ``profile_skip_batches``
(from the worker's start when it is 0) to the end of batch ``profile_skip_batches + N``: exactly ``N``
batches. ``profile_batches=True`` records the worker's whole life. A worker that ends earlier saves
what it recorded when it exits.

:class:`WorkerSetup` is the loader's ``worker_init_fn``: it hands the environment and the trace settings
of the process that iterates (``litstream.debugger.enable_tracer``) to workers started by ``spawn`` or
``forkserver``, starts worker 0's profiler, then calls the user's ``worker_init_fn``. A fork server's
children would otherwise inherit the server's environment, fixed when it started; with the hand-over every
worker sees the environment of the moment the loader's iterator started them, as a forked worker does.
"""

from __future__ import annotations

import cProfile
import os
import pstats
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._core._environ import replace_all, snapshot
from .._core._errors import ConfigurationError
from .._core._trace import TRACER
from ..read.engine._pump import WORKER_ALLOC

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["PROFILE_FILE", "ProfileArgs", "WorkerSetup", "after_batch", "dump_cprofile", "output_dir"]

PROFILE_FILE = "result.json"  # LitData's name for profile_batches' trace
CPROFILE_MAIN = "cprofile_main"
CPROFILE_WORKER = "cprofile_worker0"


@dataclass(frozen=True)
class ProfileArgs:
    """The loader's profiling arguments, checked (``batches``: ``False``, ``True`` or a count >= 1)."""

    batches: bool | int = False
    skip: int = 0
    directory: str | None = None
    cprofile: bool = False

    @classmethod
    def check(cls, batches: Any, skip: Any, directory: Any, cprofile: Any, num_workers: int) -> ProfileArgs:
        """Validate LitData's ``profile_*`` arguments.

        Raises:
            ConfigurationError: a value of the wrong type or range, ``profile_batches`` with
                ``num_workers=0`` (LitData's rule: it profiles worker 0), or both profilers at once.
        """
        if not isinstance(batches, (bool, int)) or (not isinstance(batches, bool) and batches < 0):
            raise ConfigurationError(f"profile_batches must be True, False or a batch count >= 0, got {batches!r}")
        if isinstance(skip, bool) or not isinstance(skip, int) or skip < 0:
            raise ConfigurationError(f"profile_skip_batches must be an int >= 0, got {skip!r}")
        if directory is not None and not isinstance(directory, (str, os.PathLike)):
            raise ConfigurationError(f"profile_dir must be a path or None, got {directory!r}")
        if not isinstance(cprofile, bool):
            raise ConfigurationError(f"profile_cprofile must be True or False, got {cprofile!r}")
        if batches and cprofile:
            raise ConfigurationError(
                "profile_batches and profile_cprofile both install a profiler; pass only one of them"
            )
        if batches and num_workers == 0:
            raise ConfigurationError(
                f"profile_batches={batches!r} profiles DataLoader worker 0: pass num_workers >= 1 (as LitData)"
            )
        return cls(batches, skip, None if directory is None else os.fspath(directory), cprofile)


def output_dir(directory: str | None) -> Path:
    """Where profiles go: ``directory`` (created), else the current directory."""
    path = Path(os.path.abspath(directory or os.getcwd()))
    path.mkdir(parents=True, exist_ok=True)
    return path


def dump_cprofile(profiler: cProfile.Profile, stem: Path) -> None:
    """Write ``<stem>.prof`` (``pstats`` input, e.g. snakeviz) and ``<stem>.txt`` (top 40 by self and total time)."""
    profiler.disable()
    profiler.dump_stats(f"{stem}.prof")
    with open(f"{stem}.txt", "w", encoding="utf-8") as handle:
        stats = pstats.Stats(profiler, stream=handle).strip_dirs()
        handle.write("by self time (tottime)\n")
        stats.sort_stats("tottime").print_stats(40)
        handle.write("\nby total time (cumtime)\n")
        stats.sort_stats("cumtime").print_stats(40)


class _TorchProfile:
    """worker 0's ``torch.profiler`` session for ``profile_batches``."""

    def __init__(self, args: ProfileArgs) -> None:
        self.args = args
        self.path = output_dir(args.directory) / PROFILE_FILE
        self.done = 0  # batches built by this worker
        self.profiler: Any = None
        self.saved = False
        self.path.unlink(missing_ok=True)  # as LitData: a stale result.json never passes for this run's
        if args.skip == 0:
            self.start()

    def start(self) -> None:
        from torch.profiler import ProfilerActivity, profile

        self.profiler = profile(activities=[ProfilerActivity.CPU])
        self.profiler.start()

    def save(self) -> None:
        if self.profiler is None or self.saved:
            return
        self.saved = True
        self.profiler.stop()
        tmp = self.path.with_name(f".{self.path.name}.tmp.{os.getpid()}")
        self.profiler.export_chrome_trace(str(tmp))
        os.replace(tmp, self.path)

    def step(self) -> None:
        self.done += 1
        if self.profiler is None and self.done == self.args.skip:
            self.start()
        elif type(self.args.batches) is int and self.done == self.args.skip + self.args.batches:
            self.save()


_ACTIVE: list[_TorchProfile] = []  # this worker's profile session, if any


def after_batch() -> None:
    """Called in a worker after each batch it builds (one list check when nothing is profiled)."""
    if _ACTIVE:
        _ACTIVE[0].step()


def _at_worker_exit(session: _TorchProfile | cProfile.Profile, directory: str | None) -> None:
    if isinstance(session, _TorchProfile):
        session.save()
    else:
        dump_cprofile(session, output_dir(directory) / CPROFILE_WORKER)


class WorkerSetup:
    """The loader's ``worker_init_fn`` (picklable): trace settings, worker 0's profiler, then the user's."""

    def __init__(self, user: Callable[[int], Any] | None, profile: ProfileArgs) -> None:
        self.user = user
        self.profile = profile
        self.rank = 0  # set by the loader when an epoch starts, before the workers do
        self.slots = False  # batches go through litstream._torch._slots (set by the loader likewise)
        self.environ: dict[str, str] | None = None  # set only while the loader starts its workers

    def hand_over_environ(self, start_method: str | None) -> None:
        """Called by the loader just before it starts workers with ``start_method`` (``None``: no workers):
        the workers of a ``spawn`` or ``forkserver`` start take this process's environment as it is now.
        Cleared again with ``None`` once they are started, so a pickled loader never carries it."""
        self.environ = snapshot() if start_method is not None and start_method != "fork" else None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["trace"] = TRACER.settings()  # taken when the worker is started (spawn, forkserver)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        trace = state.pop("trace", None)
        self.__dict__.update(state)
        self._trace = trace

    def __call__(self, worker_id: int) -> None:
        if self.environ is not None:  # first: the user's code below and the dataset's transforms read it
            replace_all(self.environ)
        if self.slots:
            from ._slots import ScratchPool, SlotAlloc

            pool = ScratchPool()
            WORKER_ALLOC[:] = [pool, SlotAlloc(pool)]
        trace = getattr(self, "_trace", None)
        if trace is not None:
            TRACER.adopt(trace)
        if worker_id == 0 and self.rank == 0 and (self.profile.batches or self.profile.cprofile):
            self._start_profile()
        if self.user is not None:
            self.user(worker_id)

    def _start_profile(self) -> None:
        session: _TorchProfile | cProfile.Profile
        if self.profile.batches:
            session = _TorchProfile(self.profile)
            _ACTIVE[:] = [session]
        else:
            session = cProfile.Profile()
            session.enable()
        # a DataLoader worker leaves through os._exit: multiprocessing's finalizers run, atexit does not
        mp_util = sys.modules["multiprocessing.util"]
        mp_util.Finalize(None, _at_worker_exit, args=(session, self.profile.directory), exitpriority=90)
