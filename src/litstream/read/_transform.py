"""``transform=``: one callable or a list of callables applied to every decoded sample, in order."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .._core._errors import ConfigurationError

__all__ = ["Transform", "check_transforms", "compose"]

Transform = Callable[[Any], Any] | Sequence[Callable[[Any], Any]] | None
"""What ``transform=`` accepts: ``None``, a callable, or a list/tuple of callables (applied in order)."""


def check_transforms(transform: object) -> list[Callable[[Any], Any]]:
    """Return ``transform`` as a list of callables (empty for ``None``), as LitData accepts it.

    Raises:
        ConfigurationError: (a ``ValueError``, as in LitData) ``transform`` or one of its entries is
            not callable; the message names the position and the value.
    """
    if transform is None:
        return []
    if callable(transform):
        return [transform]
    if isinstance(transform, (str, bytes)) or not isinstance(transform, Sequence):
        raise ConfigurationError(
            f"transform must be a callable or a list of callables, got {type(transform).__name__} {transform!r:.80}"
        )
    out: list[Callable[[Any], Any]] = []
    for i, t in enumerate(transform):
        if not callable(t):
            raise ConfigurationError(
                f"transform[{i}] must be callable, got {type(t).__name__} {t!r:.80}; "
                "transform takes a callable or a list of callables applied in order"
            )
        out.append(t)
    return out


def compose(transforms: Sequence[Callable[[Any], Any]]) -> Callable[[Any], Any] | None:
    """One callable applying ``transforms`` in order (``None`` when there are none)."""
    if not transforms:
        return None
    if len(transforms) == 1:
        return transforms[0]
    chain = tuple(transforms)

    def apply(sample: Any) -> Any:
        for t in chain:
            sample = t(sample)
        return sample

    return apply
