"""The package version, defined once: read by ``pyproject.toml`` (dynamic version) and ``litstream.__version__``."""

from __future__ import annotations

__version__ = "0.1.0"
