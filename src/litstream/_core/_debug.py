"""``breakpoint``: a pdb prompt that works inside DataLoader and optimize worker processes.

A child started by ``multiprocessing`` has its standard input closed (replaced by ``/dev/null``), so
the built-in ``breakpoint()`` there returns at once. LitData 0.2.76 exports a ``breakpoint`` that
re-opens the parent's terminal (the file descriptor of ``stdin`` at import time, inherited by forked
children; litstream keeps a duplicate of it in ``_terminal``, since ``multiprocessing`` closes
descriptor 0 in a child) and serialises the prompts of several processes with one lock. This is the
same idea.
"""

from __future__ import annotations

import os
import pdb
import sys
import threading
from typing import IO

from ._terminal import PROMPT_LOCK as _PROMPT_LOCK
from ._terminal import STDIN_FD as _STDIN_FD

__all__ = ["breakpoint"]


_reopened: list[IO[str]] = []
_reopen_guard = threading.Lock()


def _terminal() -> IO[str] | None:
    if _STDIN_FD is None:
        return None
    with _reopen_guard:
        if not _reopened:
            _reopened.append(os.fdopen(_STDIN_FD, closefd=False))
        return _reopened[0]


class _ProcessSafePdb(pdb.Pdb):
    """A ``Pdb`` that reads the parent's terminal and holds a cross-process lock while prompting."""

    def __init__(self) -> None:
        super().__init__(nosigint=True)

    def _cmdloop(self) -> None:
        saved = sys.stdin
        with _PROMPT_LOCK:
            terminal = _terminal()
            try:
                if terminal is not None:
                    sys.stdin = terminal
                self.cmdloop()
            finally:
                sys.stdin = saved


def breakpoint() -> None:
    """Stop the calling code under pdb, also in a worker process; LitData's ``litdata.breakpoint``.

    Call it where you would call the built-in ``breakpoint()``, e.g. in an ``optimize`` ``fn`` or a
    dataset's ``__getitem__`` run by a DataLoader worker. The prompt reads the terminal that was
    standard input when litstream was imported (children started with ``fork`` inherit it; with
    ``spawn`` it is the child's own). One process prompts at a time; the others wait their turn.
    """
    frame = sys._getframe().f_back
    _ProcessSafePdb().set_trace(frame)
