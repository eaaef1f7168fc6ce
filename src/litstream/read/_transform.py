"""``transform=``: one callable or a list of callables applied to every decoded sample, in order; and a
``StreamingDataset``'s transforms (``transform=`` or a subclass's ``transform``), through the ``Member`` protocol."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .._core._errors import ConfigurationError

if TYPE_CHECKING:
    from ._face import Member

__all__ = ["Transform", "apply", "check_transforms", "compose", "transforms"]

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


def transforms(face: Member) -> list[Callable[[Any], Any]]:
    """``face.transforms``: the spec's, else a ``transform`` attribute (a LitData subclass's method or value)."""
    if face._spec.transforms:
        return list(face._spec.transforms)
    own = getattr(face, "transform", None)
    return [] if own is None else check_transforms(own)


def apply(face: Member, sample: Any) -> Any:
    """``sample`` after ``face``'s transforms, in order."""
    for t in face.transforms:
        sample = t(sample)
    return sample
