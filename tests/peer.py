"""The LitData peer: imported through :func:`require_peer`, required in CI, optional on a developer's machine.

The compatibility tests compare litstream with LitData itself. ``require_peer("litdata")`` would
turn every one of them into a skip when the peer is missing or broken, and CI would stay green. Here:

* CI (``CI=true`` in the environment, as GitHub Actions and most CI services set it): a peer that cannot be
  imported **fails** the run, with the import error.
* Elsewhere: the tests that need it are skipped, with a reason that ``-ra`` prints.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

if TYPE_CHECKING:
    from types import ModuleType

__all__ = [
    "finish_peer_epoch",
    "in_ci",
    "litdata_marks",
    "peer_workers",
    "require_dev",
    "require_installed",
    "require_peer",
]


def litdata_marks(*warning_filters: str) -> list[pytest.MarkDecorator]:
    """A compatibility module's ``pytestmark``: the ``litdata`` mark, then one ``filterwarnings`` mark a filter.

    The filters are the module's own (most ignore the chunk files that LitData's readers leave open).
    """
    return [pytest.mark.litdata, *(pytest.mark.filterwarnings(f) for f in warning_filters)]


def peer_workers(num_workers: int) -> dict[str, Any]:
    """Keyword arguments for a LitData loader with ``num_workers`` workers, started by a ``forkserver``.

    LitData's loader otherwise forks its workers from the pytest worker, a threaded process (xdist's I/O
    thread, in-process servers): such a child can abort or hang on state another thread held at the fork
    (seen in CI: a LitData worker aborted with "terminate called without an active exception"). The
    fork server is a fresh, single-threaded interpreter (its preloads are set in ``conftest.py``).
    """
    if num_workers == 0:
        return {"num_workers": 0}
    return {"num_workers": num_workers, "multiprocessing_context": "forkserver"}


def finish_peer_epoch(iterator: Any) -> int:
    """Drain a LitData loader iterator that a test stops reading mid-epoch; returns the batches drained.

    A test that takes a LitData checkpoint after ``k`` batches then drops the iterator, and torch shuts the
    workers down mid-epoch. Twice in CI (once forked, once from the fork server) a LitData worker aborted
    in that shutdown ("terminate called without an active exception"; torch reports "killed by signal:
    Aborted" from the iterator's ``__del__``), a failure of the peer's shutdown and not of what it served;
    it did not reproduce here in ~2,300 mid-epoch shutdowns under load. Drained, the workers end at the
    epoch's end as in every other peer test. The state the test took before is not changed by this
    (LitData builds a new dict). A litstream iterator is never passed here: litstream's mid-epoch
    shutdown is tested as it is.
    """
    return sum(1 for _ in iterator)


def in_ci() -> bool:
    """True when the ``CI`` environment variable says this is a CI run (``true``, ``1``, ``yes``)."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def _missing(problem: str, what: str) -> NoReturn:
    """Fail (in CI) or skip (elsewhere) for a dependency described by ``problem``; ``what`` needs it."""
    if in_ci():
        pytest.fail(f"{problem}; CI requires it: install requirements/dev.txt", pytrace=False)
    pytest.skip(f"{problem}; install requirements/dev.txt to run this {what}", allow_module_level=True)


def require_peer(name: str = "litdata") -> ModuleType:
    """Import ``name`` (``litdata`` or one of its modules) for a compatibility test.

    Works at module level (skips or fails the whole module) and inside a test.

    Raises:
        pytest.fail.Exception: the import failed (any exception, not only ``ImportError``) and ``CI`` is set.
        pytest.skip.Exception: the import failed on a developer's machine.
    """
    try:
        return importlib.import_module(name)
    except Exception as exc:  # a broken peer may raise anything while importing
        _missing(f"the LitData peer cannot be imported ({name}: {type(exc).__name__}: {exc})", "compatibility test")


def require_dev(name: str) -> ModuleType:
    """Import ``name``, a pinned development dependency (requirements/dev.txt), for the tests that need it.

    ``pytest.importorskip`` would skip them in CI when the install is broken; this fails there instead
    (as :func:`require_peer` does) and skips only on a developer's machine without the dependency.
    Works at module level and inside a test.

    Raises:
        pytest.fail.Exception: the import failed and ``CI`` is set.
        pytest.skip.Exception: the import failed elsewhere.
    """
    try:
        return importlib.import_module(name)
    except Exception as exc:  # a broken install may raise anything while importing
        _missing(f"the development dependency {name} cannot be imported ({type(exc).__name__}: {exc})", "test")


def require_installed(name: str) -> None:
    """Check that ``name``, a pinned development dependency, is installed, without importing it.

    For a peer that the tests use from a subprocess or only in part (mosaicml-streaming: its package
    ``__init__`` imports dependencies that are deliberately not installed). Same rule as :func:`require_dev`:
    missing fails in CI and skips elsewhere. Works at module level and inside a test.

    Raises:
        pytest.fail.Exception: ``name`` is not installed and ``CI`` is set.
        pytest.skip.Exception: ``name`` is not installed elsewhere.
    """
    if importlib.util.find_spec(name) is not None:
        return
    _missing(f"the development dependency {name} is not installed", "test")
