"""Which object names an index may give: the one rule for chunk and key names read from ``index.json``.

An ``index.json`` comes from whoever wrote the dataset; its ``filename`` fields become file paths under
the dataset (or cache) directory and keys under a bucket prefix. A name is accepted only if it is a
plain relative key that stays inside that directory::

    accepted    chunk-0-3.bin   chunk-0-3.zstd.bin   part/data-00001.parquet
    refused     ../x   sub/../../x   /etc/passwd   C:/x   a\\b   a//b   ./x   .locks/x   .tmp   index.json
                0.index.json   a name with a NUL or another control character   over 1024 bytes

Hidden segments (``.name``) are refused because litstream and LitData keep their own state there
(``.locks/``, temporary writes ``.name.tmp.*``); index names because a chunk must never alias the index.
Stores check the lexical part again where they turn a key into a path or a URL (defence in depth).
"""

from __future__ import annotations

import re

from .._core._errors import FormatError

__all__ = ["MAX_NAME_BYTES", "check_object_name"]

MAX_NAME_BYTES = 1024
"""The longest name accepted, in UTF-8 bytes (S3's key limit)."""

_DRIVE = re.compile(r"^[A-Za-z]:")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_INDEX_NAMES = re.compile(r"^(index\.json|\d+\.index\.json|\d+-index\.json)$")


def _reason(name: str) -> str | None:
    """Why ``name`` is refused, or ``None`` when it is a safe relative key."""
    if not name:
        return "it is empty"
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        return f"it is longer than {MAX_NAME_BYTES} bytes"
    if _CONTROL.search(name):
        return "it holds a control character"
    if "\\" in name:
        return "it holds a backslash"
    if name.startswith("/"):
        return "it is an absolute path"
    if _DRIVE.match(name):
        return "it starts with a drive letter"
    segments = name.split("/")
    for segment in segments:
        if segment == "..":
            return "it climbs out of the dataset directory with '..'"
        if segment in ("", "."):
            return "it has an empty or '.' path segment"
        if segment.startswith("."):
            return f"its segment {segment!r} is hidden (reserved for locks and temporary files)"
    if _INDEX_NAMES.match(segments[-1]):
        return "it names an index file"
    return None


def check_object_name(name: object, where: str) -> str:
    """Return ``name`` if it is a safe relative object name (rules in the module docstring).

    Args:
        name: The value read from an index.
        where: What holds it, for the message (``"index.json chunks[3].filename"``).

    Raises:
        FormatError: ``name`` is not a ``str`` or breaks a rule; the message names ``where``, the value
            and the rule.
    """
    if not isinstance(name, str):
        raise FormatError(f"{where} must be a string, got {type(name).__name__} {name!r}")
    reason = _reason(name)
    if reason is not None:
        raise FormatError(
            f"{where}={name[:200]!r} is refused: {reason}. Chunk names must be relative keys inside the "
            "dataset directory (e.g. 'chunk-0-0.bin'); this index.json is damaged or not trustworthy"
        )
    return name
