"""The read tests' shared fixtures, defined in ``read_fixtures.py`` (a module name of its own, so that mypy
checks it: every conftest is a module named ``conftest``)."""

from __future__ import annotations

from read_fixtures import ints_100, no_global_pickle_setting

__all__ = ["ints_100", "no_global_pickle_setting"]
