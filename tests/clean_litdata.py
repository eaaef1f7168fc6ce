"""LitData's ``optimize`` with ``start_method="fork"`` (the fast one: spawning re-imports torch per worker),
run inside a clean, single-threaded process (:func:`clean_process.run_clean`) so that what forks is never
the threaded pytest worker. The arguments must pickle (``cloudpickle``: module-level functions by name)."""

from __future__ import annotations

from typing import Any

from clean_process import run_clean

__all__ = ["litdata_optimize"]


def litdata_optimize(**kwargs: Any) -> None:
    """``litdata.optimize(start_method="fork", **kwargs)`` in a fresh interpreter; its errors re-raised here."""
    run_clean(_optimize, kwargs)


def _optimize(kwargs: dict[str, Any]) -> None:
    import litdata

    litdata.optimize(start_method="fork", **kwargs)
