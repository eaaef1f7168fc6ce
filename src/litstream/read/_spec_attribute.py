"""``SpecAttribute`` / ``ReaderAttribute``: a face's attribute kept in its reader (``ReaderAttribute``) or in the
reader's frozen :class:`~litstream.read._spec.ReadSpec` (``SpecAttribute``).

``ds.seed`` reads ``ds._reader.spec.seed``; setting it replaces the spec through its checks
(``DatasetReader.replace_spec``): LitData's public attributes on a face that holds a
:class:`~litstream.read._reader.DatasetReader`. ``ReaderAttribute``: one the reader keeps itself (LitData's
counters and ``shuffler``).
"""

from __future__ import annotations

from typing import Generic, TypeVar, overload

__all__ = ["ReaderAttribute", "SpecAttribute"]

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


class ReaderAttribute(Generic[T]):
    """A facade attribute kept by its reader (``ds.current_epoch`` is ``ds._reader.current_epoch``): LitData's
    public counters and ``shuffler``, read and set on the :class:`~litstream.read._reader.DatasetReader`."""

    def __init__(self, name: str, doc: str) -> None:
        self.name, self.__doc__ = name, doc

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> ReaderAttribute[T]: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...
    def __get__(self, obj: object, owner: type | None = None) -> T | ReaderAttribute[T]:
        if obj is None:
            return self
        reader = obj.__dict__.get("_reader")
        if reader is None:
            raise AttributeError(f"{type(obj).__name__} has no {self.name} before its __init__ ran")
        value: T = getattr(reader, self.name)
        return value

    def __set__(self, obj: object, value: T) -> None:
        reader = obj.__dict__.get("_reader")
        if reader is None:  # a subclass setting it before calling __init__, which sets it again
            return
        setattr(reader, self.name, value)
