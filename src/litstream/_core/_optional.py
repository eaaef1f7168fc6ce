"""Optional dependencies (the extras in ``pyproject.toml``), imported on first use."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ._errors import ConfigurationError

if TYPE_CHECKING:
    from types import ModuleType

__all__ = ["optional_module"]


def optional_module(name: str, missing: str) -> ModuleType:
    """Import and return module ``name``, which an extra installs.

    Args:
        name: The module's dotted name (``"zstandard"``, ``"cryptography.hazmat.primitives"``).
        missing: The message when it is not installed; it names the extra (``pip install 'litstream[zstd]'``).

    Raises:
        ConfigurationError: the module cannot be imported (message ``missing``, chained to the ImportError).
    """
    try:
        return importlib.import_module(name)
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigurationError(missing) from exc
