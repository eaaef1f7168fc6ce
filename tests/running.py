"""What is still running: threads executing litstream's own code (for tests that check nothing is left)."""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

import litstream

__all__ = ["litstream_frames"]

_PACKAGE_DIR = os.path.dirname(os.path.abspath(litstream.__file__))


def litstream_frames(ignore: set[int | None]) -> list[str]:
    """Threads (other than this one and ``ignore``) currently executing litstream's own modules."""
    busy = []
    for ident, frame in sys._current_frames().items():
        if ident == threading.get_ident() or ident in ignore:
            continue
        f: Any = frame
        while f is not None:
            if os.path.abspath(f.f_code.co_filename).startswith(_PACKAGE_DIR):
                busy.append(f"{f.f_code.co_filename}:{f.f_code.co_name}")
                break
            f = f.f_back
    return busy
