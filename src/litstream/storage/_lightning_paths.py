"""LitData 0.2.76's path conventions for local paths: ``{%strftime}`` time templates and ``/teamspace/...``.

Both apply to a local path given as a string (not to URLs, ``local:`` paths or ``Path`` objects), as in
LitData's resolver:

* **Time template**: the first ``{%...}`` placeholder of the path is replaced by the current local time
  formatted with that ``strftime`` pattern (``"out_{%Y%m%d}"`` → ``"out_20261204"``); a path may hold one.
* **``/teamspace/...``** (Lightning AI Studios): ``/teamspace/studios/this_studio/...`` is the Studio's
  own disk, a plain local path. ``/teamspace/<kind>/<name>/...`` for the data connection kinds below
  (and another Studio's ``/teamspace/studios/<name>/...``) is a mount that LitData resolves to the
  object-store URL behind it by asking Lightning's cloud API (``lightning_sdk``). litstream does not
  call that API: where the mount is present on this machine its files are read and written through
  it; elsewhere a ``ConfigurationError`` names the path and the fix (pass the connection's URL).
"""

from __future__ import annotations

import datetime
import os
import re

from .._core._errors import ConfigurationError

__all__ = ["CONNECTION_KINDS", "check_teamspace", "resolve_time_template"]

#: LitData's ``/teamspace/<kind>/<name>/...`` mounts that it resolves through Lightning's API.
CONNECTION_KINDS = (
    "studios",
    "s3_connections",
    "gcs_connections",
    "s3_folders",
    "gcs_folders",
    "lightning_storage",
    "datasets",
)
_TEMPLATE = re.compile(r"\{(%[^{}]*)\}")


def resolve_time_template(path: str, now: datetime.datetime | None = None) -> str:
    """``path`` with its first ``{%...}`` placeholder replaced by ``now`` (default: the current local time).

    Args:
        path: A local path string.
        now: The time to format (a seam for tests); ``None``: ``datetime.datetime.now()``.

    Returns:
        The path, unchanged when it holds no placeholder.
    """
    match = _TEMPLATE.search(path)
    if match is None:
        return path
    when = datetime.datetime.now() if now is None else now
    return path.replace(match.group(0), when.strftime(match.group(1)))


def check_teamspace(path: str, *, argument: str) -> None:
    """Refuse a ``/teamspace/<kind>/<name>/...`` data connection path that is not mounted here.

    Args:
        path: An absolute local path.
        argument: The argument's name, for the message.

    Raises:
        ConfigurationError: ``path`` is a Lightning data connection path that LitData would resolve
            through Lightning's API and that no mount on this machine provides.
    """
    parts = path.split("/")
    if len(parts) <= 3 or parts[1] != "teamspace" or parts[2] not in CONNECTION_KINDS:
        return
    if parts[2] == "studios" and parts[3] == "this_studio":
        return
    mount = "/".join(parts[:4])
    if os.path.isdir(mount):
        return
    raise ConfigurationError(
        f"{argument}={path!r} is a Lightning AI {parts[2]} path, which LitData resolves to its object-store URL "
        f"through Lightning's cloud API; litstream does not call that API and {mount} is not mounted here: pass "
        "the connection's URL (s3://..., gs://...) instead, or run where the mount exists"
    )
