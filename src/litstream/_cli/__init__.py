"""The ``litstream`` command line (the console script is ``litstream._cli._main:main``)."""

from __future__ import annotations

from ._main import main as main
