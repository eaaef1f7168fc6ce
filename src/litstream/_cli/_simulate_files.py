"""The YAML config files of ``litstream simulate``: read, written, the YAML module (PyYAML, extra ``simulate``)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from .._core._errors import ConfigurationError

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["load_config", "load_relative", "relative_to_config", "write_text", "yaml_module"]


def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (a temporary file renamed into place)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def yaml_module() -> Any:
    try:
        import yaml
    except ImportError:
        raise ConfigurationError(
            "litstream simulate reads and writes YAML: pip install 'litstream[simulate]'"
        ) from None
    return yaml


def load_config(config_path: Path) -> dict[str, Any]:
    yaml = yaml_module()

    try:
        text = config_path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigurationError(
            f"simulate run: the config {config_path} does not exist; write one with `litstream simulate init`"
        ) from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigurationError(f"simulate run: {config_path} is not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfigurationError(f"simulate run: {config_path} must hold a mapping with at least 'dataset'")
    return raw


def relative_to_config(config_path: Path, raw: dict[str, Any]) -> dict[str, Any]:
    """A copy of the config mapping ``raw`` whose relative local paths are made relative to the config file."""
    out = dict(raw)
    for key in ("dataset", "index_path"):
        value = out.get(key)
        if isinstance(value, str) and value and "://" not in value and not os.path.isabs(os.path.expanduser(value)):
            out[key] = str(config_path.parent / value)
    return out


def load_relative(config_path: Path) -> dict[str, Any]:
    """The config's mapping (:func:`load_config`), its relative local paths made relative to the config file."""
    return relative_to_config(config_path, load_config(config_path))
