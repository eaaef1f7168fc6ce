"""``SpecAttribute``: a face's attribute kept in its frozen :class:`~litstream.read._spec.ReadSpec`.

``ds.seed`` reads ``ds._spec.seed``; setting it replaces the spec (LitData's public attributes on a spec-backed
face).
"""

from __future__ import annotations

import dataclasses
from typing import Generic, TypeVar, overload

__all__ = ["SpecAttribute"]

T = TypeVar("T")


class SpecAttribute(Generic[T]):
    """A facade attribute kept in its ``_spec`` (``ds.seed`` is ``ds._spec.seed``); setting it replaces the spec."""

    def __init__(self, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> SpecAttribute[T]: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...
    def __get__(self, obj: object, owner: type | None = None) -> T | SpecAttribute[T]:
        if obj is None:
            return self
        spec = obj.__dict__.get("_spec")
        if spec is None:
            raise AttributeError(f"{type(obj).__name__} has no {self.name} before its __init__ ran")
        value: T = getattr(spec, self.name)
        return value

    def __set__(self, obj: object, value: T) -> None:
        spec = obj.__dict__.get("_spec")
        if spec is None:  # a subclass setting it before calling __init__, which sets it again
            return
        obj.__dict__["_spec"] = dataclasses.replace(spec, **{self.name: value})
