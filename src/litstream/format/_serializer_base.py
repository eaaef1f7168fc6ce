"""The serializer interface shared by every leaf encoding (see :mod:`._serializers`)."""

from __future__ import annotations

import abc
import sys
from typing import TYPE_CHECKING, Any

from .._core._errors import FormatError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["Serializer", "loaded_class", "select_serializer"]


class Serializer(abc.ABC):
    """Encodes one kind of leaf to bytes and decodes it back.

    Attributes:
        name: The registry key, recorded as the leaf's ``data_format`` unless ``serialize`` returns another.
        fixed_size: The payload size in bytes when it never varies (int and float: 8, bool: 1), else ``None``.
    """

    name: str
    fixed_size: int | None = None

    @abc.abstractmethod
    def can_serialize(self, obj: object) -> bool:
        """Return whether this serializer accepts ``obj``. Never raises, never does I/O."""

    @abc.abstractmethod
    def serialize(self, obj: Any) -> tuple[bytes, str | None]:
        """Encode ``obj``.

        Returns:
            The payload, and the ``data_format`` to record when it differs from ``name`` (else ``None``).

        Raises:
            FormatError: ``obj`` has a value this encoding cannot represent.
        """

    @abc.abstractmethod
    def deserialize(self, data: bytes | memoryview) -> Any:
        """Decode one payload (the exact leaf bytes; ``data`` is not modified or retained).

        Raises:
            FormatError: ``data`` is not a valid payload for this encoding.
        """

    def accepts(self, obj: object) -> bool:
        """Whether a leaf whose format this serializer fixed (from the first sample) can store ``obj``.

        Defaults to :meth:`can_serialize`; the self-describing ``numpy`` and ``tensor`` encodings
        accept any array / tensor, since each payload records its own dtype and shape.
        """
        return self.can_serialize(obj)

    def same_format(self, recorded: str, fixed: str) -> bool:
        """Whether a later leaf that encodes as ``recorded`` may be stored in a column fixed as ``fixed``.

        Defaults to equality; media encodings whose suffix is only a hint (``"image:png"`` in an
        ``"image:jpg"`` column, decoded alike) accept any suffix, as LitData stores them.
        """
        return recorded == fixed

    def setup(self, data_format: str) -> Serializer | None:
        """Return a serializer configured for a recorded ``data_format``; stateless serializers return self.
        A subclass written for LitData, whose ``setup(metadata)`` configures itself and returns ``None``,
        works too (the serializer itself is then used).

        Raises:
            FormatError: ``data_format`` lacks information this serializer needs.
        """
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"


def loaded_class(module: str, name: str) -> Any:
    """Return ``module.name`` if ``module`` is already imported, else ``None`` (no import is triggered)."""
    loaded = sys.modules.get(module)
    return getattr(loaded, name, None) if loaded is not None else None


def select_serializer(obj: object, registry: Mapping[str, Serializer]) -> Serializer:
    """Return the first serializer in ``registry`` (iteration order) whose ``can_serialize(obj)`` is true.

    Raises:
        FormatError: no serializer accepts ``obj`` (impossible when ``pickle`` is registered).
    """
    for serializer in registry.values():
        if serializer.can_serialize(obj):
            return serializer
    raise FormatError(
        f"no serializer accepts an object of type {type(obj).__qualname__}; registered: {', '.join(registry)}"
    )
