"""``item_shuffle_window``: the in-chunk shuffle block size an argument (or LitData's variable) means."""

from __future__ import annotations

from typing import Any

from .._core._environ import environ
from .._core._errors import ConfigurationError, PlanError
from .plan._assign import resolve_item_shuffle_window

__all__ = ["item_shuffle_window_value"]


def item_shuffle_window_value(value: Any) -> int:
    """The in-chunk shuffle block size ``item_shuffle_window=value`` means (LitData 0.2.76's values).

    ``None`` / ``"auto"`` take ``LITDATA_ITEM_SHUFFLE_WINDOW`` when it is set, as LitData does.

    Raises:
        ConfigurationError: a negative int, a float or an unknown string (see
            ``read.plan._assign.resolve_item_shuffle_window``), in the argument or the variable.
    """
    if value is None or (isinstance(value, str) and value.strip().lower() == "auto"):
        variable = environ().litdata_item_shuffle_window
        if variable is not None and variable.strip().lower() != "auto":  # LitData's fallback for the default
            try:
                return resolve_item_shuffle_window(variable)
            except PlanError:
                raise ConfigurationError(
                    f"LITDATA_ITEM_SHUFFLE_WINDOW={variable!r} is not understood: set an int >= 0, 'auto' (256) or "
                    "'full' (0), or unset it"
                ) from None
    try:
        return resolve_item_shuffle_window(value)
    except PlanError as exc:
        raise ConfigurationError(
            f"{exc}: item_shuffle_window is the in-chunk shuffle block size of shuffle=True (LitData's, default 256)"
        ) from None
