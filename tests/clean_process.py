"""Run a test's body in a fresh Python process, so that what it forks is a clean, single-threaded parent.

A pytest worker has threads (xdist's I/O thread, in-process servers, obstore's runtime), and a child
forked from a threaded process can hang on a lock another thread held at the fork. Tests that fork
therefore run their body with :func:`run_clean`: a new interpreter (``subprocess``) imports the body's
module by name (the same ``sys.path`` as this process), calls it and sends back its result or its
exception (re-raised here with the child's traceback in the message).

The body must be a module-level function; its arguments and result must pickle (``cloudpickle``).
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import traceback
from typing import Any

import cloudpickle

__all__ = ["CleanProcessError", "run_clean"]

DEADLINE = 600.0  # seconds the body may take (a hang guard; the suite's own timeout is per test)


class CleanProcessError(AssertionError):
    """The body raised in the clean process; the message holds its traceback."""


def run_clean(fn: Any, *args: Any, timeout: float = DEADLINE, env: dict[str, str] | None = None) -> Any:
    """``fn(*args)`` in a fresh Python process; its return value, or its exception re-raised here.

    Raises:
        CleanProcessError: ``fn`` raised (the message is the child's traceback), or the process died.
        subprocess.TimeoutExpired: the process ran past ``timeout`` seconds (it is killed).
    """
    payload = cloudpickle.dumps((fn, args))
    child_env = dict(os.environ if env is None else env)
    child_env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    here = os.path.dirname(os.path.abspath(__file__))
    proc = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.path.insert(0, {here!r}); import clean_process as c; c._main()"],
        input=payload,
        capture_output=True,
        timeout=timeout,
        env=child_env,
        check=False,
    )
    if proc.returncode != 0 or not proc.stdout:
        raise CleanProcessError(
            f"the clean process exited with {proc.returncode}: {proc.stderr.decode(errors='replace')[-4000:]}"
        )
    ok, value = pickle.loads(proc.stdout)
    if not ok:
        raise CleanProcessError(value)
    return value


def _main() -> None:
    fn, args = pickle.loads(sys.stdin.buffer.read())
    result = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # what the body (and its children) print goes to stderr, not into the answer
    try:
        outcome: tuple[bool, Any] = (True, fn(*args))
    except BaseException:
        outcome = (False, traceback.format_exc())
    sys.stdout.flush()
    result.write(cloudpickle.dumps(outcome))
    result.close()
