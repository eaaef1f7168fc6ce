"""``SpecAttribute``: a face's attribute kept in its reader's frozen :class:`~litstream.read._spec.ReadSpec`.

``ds.seed`` reads ``ds._reader.spec.seed``; setting it replaces the spec through its checks
(``DatasetReader.replace_spec``): LitData's public attributes on a face that holds a
:class:`~litstream.read._reader.DatasetReader`.
"""

from __future__ import annotations

from typing import Generic, TypeVar, overload

__all__ = ["SpecAttribute"]

T = TypeVar("T")


class SpecAttribute(Generic[T]):
    """A facade attribute kept in its reader's spec (``ds.seed`` is ``ds._reader.spec.seed``); setting it replaces
    the spec through ``ReadSpec.replace``'s checks (``ConfigurationError`` naming a bad value)."""

    def __init__(self, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> SpecAttribute[T]: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...
    def __get__(self, obj: object, owner: type | None = None) -> T | SpecAttribute[T]:
        if obj is None:
            return self
        reader = obj.__dict__.get("_reader")
        if reader is None:
            raise AttributeError(f"{type(obj).__name__} has no {self.name} before its __init__ ran")
        value: T = getattr(reader.spec, self.name)
        return value

    def __set__(self, obj: object, value: T) -> None:
        reader = obj.__dict__.get("_reader")
        if reader is None:  # a subclass setting it before calling __init__, which sets it again
            return
        reader.replace_spec(**{self.name: value})
