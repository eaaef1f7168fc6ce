"""Named crash points: where the crash tests kill a writer (``tests/write/test_crash_matrix.py``).

A writer calls :func:`crash_point` at the moments that matter to its atomicity (before its first chunk,
between chunks, between its partial indexes and its commit, inside the commit, during clean-up). Nothing
happens unless the environment variable ``LITSTREAM_TEST_CRASH_AT`` names that point, optionally with the
hit to crash at (``"commit:after-index"`` or ``"chunk:stored@3"``): then the process group of the process
that reaches it is killed with ``SIGKILL`` at once, as an out-of-memory killer or a node failure would, with
no ``finally`` block, ``atexit`` handler or flush running. A test hook, documented in docs/environment.md;
never set it outside a test.
"""

from __future__ import annotations

import os
import signal
import threading

from ._environ import environ

__all__ = ["CRASH_ENV", "crash_point"]

CRASH_ENV = "LITSTREAM_TEST_CRASH_AT"
"""The variable that names the crash point (read through ``_environ.environ``)."""

_hits: dict[str, int] = {}
_lock = threading.Lock()


def crash_point(name: str) -> None:
    """Kill this process group with ``SIGKILL`` if ``LITSTREAM_TEST_CRASH_AT`` names ``name`` (and this hit)."""
    wanted = environ().litstream_test_crash_at
    if not wanted:
        return
    point, _, count = wanted.partition("@")
    if point != name:
        return
    with _lock:
        _hits[name] = hit = _hits.get(name, 0) + 1
    if hit != (int(count) if count.isdigit() else 1):
        return
    try:
        os.killpg(os.getpgrp(), signal.SIGKILL)
    finally:
        os.kill(os.getpid(), signal.SIGKILL)
