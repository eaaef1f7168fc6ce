"""Turn what users pass as ``input_dir`` / ``output_dir`` into a :class:`Dir` and a :class:`Store`.

This slice supports local storage: plain paths, ``pathlib.Path``, ``file://`` URLs, LitData's
``local:`` prefix, a :class:`Dir`, or a ready :class:`Store` instance (e.g. an
``ObstoreStore(obstore.store.MemoryStore())``). Object-store URLs are recognised and rejected with
a clear message until their stores land.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .._errors import ConfigurationError
from ._store import LocalFileStore, Store

__all__ = ["Dir", "resolve_dir", "store_for"]

_REMOTE_SCHEMES = (
    "s3://",
    "gs://",
    "r2://",
    "azure://",
    "az://",
    "abfs://",
    "abfss://",
    "hf://",
    "http://",
    "https://",
)


@dataclass(frozen=True)
class Dir:
    """A dataset location, as in LitData: a local ``path``, a remote ``url``, or both."""

    path: str | None = None
    url: str | None = None


def resolve_dir(value: str | os.PathLike[str] | Dir | None, *, argument: str = "input_dir") -> Dir:
    """Normalise ``value`` to a :class:`Dir` with an absolute local path.

    Raises:
        ConfigurationError: ``value`` is ``None``/empty, or an object-store URL (not supported yet).
    """
    if isinstance(value, Dir):
        if value.url is not None and value.path is None:
            return resolve_dir(value.url, argument=argument)
        return Dir(path=str(Path(value.path).absolute()) if value.path else None, url=value.url)
    if value is None or (isinstance(value, str) and not value.strip()):
        raise ConfigurationError(f"{argument} is required: pass a local directory path")
    text = os.fspath(value)
    if text.startswith(_REMOTE_SCHEMES):
        raise ConfigurationError(
            f"{argument}={text!r}: object-store URLs are not supported in this version of litstream; "
            "pass a local directory (or a Store instance)"
        )
    if text.startswith("file://"):
        text = text[len("file://") :]
    elif text.startswith("local:"):
        text = text[len("local:") :]
    return Dir(path=str(Path(text).expanduser().absolute()))


def store_for(value: str | os.PathLike[str] | Dir | Store, *, argument: str = "input_dir") -> Store:
    """The :class:`Store` for a location (a Store instance is returned as is)."""
    if isinstance(value, Store) and not isinstance(value, (str, os.PathLike, Dir)):
        return value
    resolved = resolve_dir(value, argument=argument)
    assert resolved.path is not None
    return LocalFileStore(resolved.path)
