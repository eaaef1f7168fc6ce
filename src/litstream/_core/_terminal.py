"""The parent's terminal and prompt lock for ``litstream.breakpoint``, taken when litstream is imported.

Kept apart from ``_debug`` (which imports pdb) so that ``import litstream`` stays cheap: the package
imports this module eagerly, because a child started by ``multiprocessing`` has lost descriptor 0 by
the time it first touches ``litstream.breakpoint``; it inherits the duplicate and the lock made here.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from typing import Any

__all__ = ["PROMPT_LOCK", "STDIN_FD"]


def _stdin_fd() -> int | None:
    # A duplicate: multiprocessing closes descriptor 0 in its children and reuses it for /dev/null.
    try:
        return os.dup(sys.stdin.fileno())
    except (AttributeError, OSError, ValueError):  # no stdin, or one without a file descriptor
        return None


STDIN_FD = _stdin_fd()
PROMPT_LOCK: Any = multiprocessing.Lock()
