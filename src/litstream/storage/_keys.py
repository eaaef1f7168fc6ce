"""The lexical rule every store applies to a key before turning it into a path or a URL.

Names read from an index are validated once, where the index is parsed (``format/_names.py``); this is
the second line of defence, so that no caller of a :class:`~litstream.Store` — ours or a user's — can make
a store read or write outside its root: a key is a ``/``-separated relative path with no empty, ``.`` or
``..`` segment, no backslash, no drive letter and no control character.
"""

from __future__ import annotations

import re

from .._core._errors import ConfigurationError

__all__ = ["check_key"]

_BAD_CHARS = re.compile(r"[\x00-\x1f\x7f\\]")
_DRIVE = re.compile(r"^[A-Za-z]:")


def check_key(key: str, where: str) -> str:
    """Return ``key`` if it is a relative key that stays inside the store's root.

    Args:
        key: The object's key.
        where: The store's URL, for the message.

    Raises:
        ConfigurationError: ``key`` is empty, absolute, climbs out with ``..``, or holds a backslash, a drive
            letter, an empty or ``.`` segment, or a control character.
    """
    if (
        not isinstance(key, str)
        or not key
        or key.startswith("/")
        or _BAD_CHARS.search(key)
        or _DRIVE.match(key)
        or any(part in ("", ".", "..") for part in key.split("/"))
    ):
        raise ConfigurationError(
            f"{where}: the object key {key!r} is refused: it must be a relative '/'-separated key inside the "
            "store's root, without '.', '..', empty segments, backslashes or control characters"
        )
    return key
