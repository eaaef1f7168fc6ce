"""LitData's own wrappers (``litdata.types.Text``, ``Image``, ...) given to litstream's writer.

Code moving from LitData may still build samples with ``from litdata import Image``. Such a leaf is
converted to litstream's wrapper of the same name (same fields, so the same meaning) and written by
the encoding that wrapper selects: the dataset is the one ``litstream.Image`` would give, not a
pickle of LitData's class. litdata is never imported here; a leaf is recognised by its class's module.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from ..._core._errors import FormatError
from .._serializer_base import Serializer, select_serializer
from ._base import same_head

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["LitdataWrapperSerializer", "from_litdata"]

_MODULE = "litdata.types"
_HOMES = {
    "Text": "_media_text", "File": "_media_text", "Image": "_media_image", "Jpeg": "_media_image",
    "JpegArray": "_media_image", "Pil": "_media_image", "Tiff": "_media_image", "Audio": "_media_audio",
    "Video": "_media_video", "Nifti": "_media_nifti", "Mesh": "_media_mesh", "Pdf": "_media_mesh",
    "Graph": "_media_graph", "Tensor": "_media_tensor",
}  # fmt: skip


def _is_litdata_wrapper(obj: object) -> bool:
    kind = type(obj)
    return kind.__module__ == _MODULE and kind.__name__ in _HOMES and dataclasses.is_dataclass(obj)


def from_litdata(obj: object) -> Any:
    """litstream's wrapper equal to a ``litdata.types`` wrapper ``obj`` (children of a ``JpegArray`` too)."""
    import importlib

    name = type(obj).__name__
    ours = getattr(importlib.import_module(f"{__package__}.{_HOMES[name]}"), name)
    values = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}  # type: ignore[arg-type]
    if name == "JpegArray":
        values["images"] = [from_litdata(i) if _is_litdata_wrapper(i) else i for i in values["images"]]
    return ours(**values)


class LitdataWrapperSerializer(Serializer):
    """Writes ``litdata.types`` wrappers as their litstream twins (never recorded in ``index.json``).

    Args:
        fresh: Makes a new default registry (``_serializers.default_serializers``); a twin is written by the
            first of its serializers, other than this one, that accepts it.
    """

    name = "litdata_types"

    def __init__(self, fresh: Callable[[], dict[str, Serializer]]) -> None:
        self._fresh = fresh
        self._registry: dict[str, Serializer] | None = None

    def can_serialize(self, obj: object) -> bool:
        return _is_litdata_wrapper(obj)

    def _inner(self, obj: object) -> Serializer:
        if self._registry is None:
            self._registry = {k: s for k, s in self._fresh().items() if k != self.name}
        return select_serializer(obj, self._registry)

    def serialize(self, obj: Any) -> tuple[bytes, str | None]:
        ours = from_litdata(obj)
        inner = self._inner(ours)
        data, recorded = inner.serialize(ours)
        return data, recorded or inner.name

    def deserialize(self, data: bytes | memoryview) -> Any:
        raise FormatError("'litdata_types' is never a recorded data_format; the dataset's index.json is invalid")

    def same_format(self, recorded: str, fixed: str) -> bool:
        return same_head(recorded, fixed)
