"""The Combined / Parallel tests' datasets, defined in ``compose_sets.py`` (a module name of its own, so that mypy
checks it: every conftest is a module named ``conftest``)."""

from __future__ import annotations

from compose_sets import ints_10, ints_50, mix_sets, odd_37, thousands_50

__all__ = ["ints_10", "ints_50", "mix_sets", "odd_37", "thousands_50"]
