"""LitData 0.2.76 read parameters that litstream accepts for drop-in use but does not act on, and the value
checks shared with the write side (``write/_params.py``).

Two kinds. *Tuning knobs* (downloader/uploader thread counts, DNS, decode batching, O_DIRECT) change
how fast LitData works, never what it produces; litstream schedules its own I/O, so any valid value
is accepted and has no effect. *Behaviour switches* (a custom reader, profiling, elastic resume,
Lightning machines) change what LitData does; litstream does not implement them, so only the default
is accepted and any other value raises :class:`~litstream.ConfigurationError` naming the parameter,
rather than being silently ignored. docs/migrating-from-litdata.md lists them all.
"""

from __future__ import annotations

from typing import Any

from .._core._errors import ConfigurationError
from .._core._litdata_env import warn_ignored

__all__ = ["check_read_params", "optional_bool", "optional_count", "refuse"]


def refuse(name: str, value: Any, default: Any, why: str) -> None:
    if value is not default and value != default:
        raise ConfigurationError(
            f"{name}={value!r} is not supported by litstream ({why}); leave it at its default, {default!r}"
        )


def optional_count(name: str, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigurationError(f"{name} must be None or an int >= 1, got {value!r}")


def optional_bool(name: str, value: Any) -> None:
    if value is not None and not isinstance(value, bool):
        raise ConfigurationError(f"{name} must be None, True or False, got {value!r}")


def check_read_params(
    *,
    session_options: Any = None,
    force_override_state_dict: Any = False,
    num_canonical_nodes: Any = None,
    batch_decode: Any = "auto",
    window_direct_io: Any = False,
) -> None:
    """Validate the LitData-only arguments of ``StreamingDataset``.

    Also warns once for each ``LITDATA_*`` variable that is set and that litstream ignores (``_litdata_env``).

    Raises:
        ConfigurationError: a behaviour switch has a value other than its default, or a knob a bad type.
    """
    warn_ignored(stacklevel=4)  # the caller of StreamingDataset(...)
    if session_options not in (None, {}):
        raise ConfigurationError(
            f"session_options={session_options!r} is not supported by litstream (boto3 session options); "
            "give credentials and the profile in storage_options instead, see docs/storage.md"
        )
    if not isinstance(force_override_state_dict, bool):
        raise ConfigurationError(f"force_override_state_dict must be True or False, got {force_override_state_dict!r}")
    optional_count("num_canonical_nodes", num_canonical_nodes)
    if batch_decode not in ("auto", "all", True, False) and (
        isinstance(batch_decode, bool) or not isinstance(batch_decode, int) or batch_decode < 0
    ):
        raise ConfigurationError(f"batch_decode must be 'auto', 'all', a bool or an int >= 0, got {batch_decode!r}")
    if not isinstance(window_direct_io, bool):
        raise ConfigurationError(f"window_direct_io must be True or False, got {window_direct_io!r}")
