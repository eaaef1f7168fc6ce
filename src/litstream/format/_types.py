"""``config.types``: the fused JSON schema LitData 0.2.76 records for a dataset, and the ``json`` leaf rule.

Each sample gets a type (:func:`infer_type`); the dataset's type is all of them fused (:func:`fuse_type`):
a field missing or ``None`` in some samples becomes ``optional``, disagreeing kinds become ``"json"``.
Kinds: ``str int float bool bytes null json`` (scalars), ``list`` (with ``value``), ``map`` (with
``value``), ``struct`` (with ``fields``), and LitData's media names (``tensor`` for a ``torch.Tensor``,
``pil`` for a PIL image, ...). A NumPy array, a tuple or any other object is ``"json"``.

Written to ``index.json`` by :func:`schema_to_json` (a struct as a plain field map, a non-optional
scalar as its name, anything else as ``{"type": ..., "optional": true, "value"/"fields": ...}``).

For a ``dict`` sample, :func:`wrap_for_pytree` turns every field whose fused kind is ``list``, ``map`` or
``json`` and whose value is plain JSON into one :class:`~._json_serializer.JsonLeaf`, as LitData 0.2.76
does; nested ``dict`` fields (``struct``) stay nodes of the pytree. Unlike LitData, missing fields and
``None`` values are not replaced by defaults, and keys absent from the first sample are not dropped:
the sample keeps them, so the encoder reports the mismatch instead of writing altered data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._json_serializer import JsonLeaf

__all__ = ["JsonType", "fuse_schema_json", "fuse_type", "infer_type", "schema_to_json", "wrap_for_pytree"]

_MEDIA_KINDS = {
    "Audio": "audio", "Video": "video", "Image": "image", "Jpeg": "jpeg", "JpegArray": "jpeg_array",
    "Pil": "pil", "Tiff": "tiff", "Text": "text", "File": "file", "Mesh": "mesh", "Pdf": "pdf",
    "Nifti": "nifti", "Graph": "graph", "Tensor": "tensor",
}  # fmt: skip
_SCALARS = frozenset({"str", "int", "float", "bool", "bytes", "null", "json", *_MEDIA_KINDS.values()})


@dataclass(frozen=True)
class JsonType:
    """One node of the schema: its kind, a list/map element type, struct fields, and whether it may be absent."""

    kind: str
    value: JsonType | None = None
    fields: dict[str, JsonType] | None = None
    optional: bool = False

    def as_optional(self) -> JsonType:
        return self if self.optional else JsonType(self.kind, self.value, self.fields, True)


def infer_type(value: Any) -> JsonType:
    """The type of one value (LitData 0.2.76's ``infer_type``)."""
    if value is None:
        return JsonType("null", optional=True)
    if isinstance(value, JsonLeaf):
        return infer_type(value.value)
    cls = type(value)
    media = _MEDIA_KINDS.get(cls.__name__)
    if media is not None:
        return JsonType(media)
    if (getattr(cls, "__module__", "") or "").startswith("PIL.") and (
        cls.__name__.endswith("ImageFile") or cls.__name__ == "Image"
    ):
        return JsonType("pil")
    if isinstance(value, bool):
        return JsonType("bool")
    if isinstance(value, int):
        return JsonType("int")
    if isinstance(value, float):
        return JsonType("float")
    if isinstance(value, str):
        return JsonType("str")
    if isinstance(value, (bytes, bytearray)):
        return JsonType("bytes")
    if isinstance(value, list):
        if not value:
            return JsonType("list")
        element = infer_type(value[0])
        for item in value[1:]:
            element = fuse_type(element, infer_type(item))
        return JsonType("list", value=element)
    if isinstance(value, dict):
        return JsonType("struct", fields={key: infer_type(item) for key, item in value.items()})
    return JsonType("json")


def _fuse_values(left: JsonType | None, right: JsonType | None) -> JsonType | None:
    if left is None:
        return right
    if right is None:
        return left
    return fuse_type(left, right)


def _struct_value(schema: JsonType) -> JsonType:
    fused: JsonType | None = None
    for item in (schema.fields or {}).values():
        fused = item if fused is None else fuse_type(fused, item)
    return fused or JsonType("json")


def fuse_type(left: JsonType | None, right: JsonType | None) -> JsonType:
    """Merge two observations (LitData 0.2.76's ``fuse_type``)."""
    if left is None:
        return right.as_optional() if right is not None else JsonType("json", optional=True)
    if right is None:
        return left.as_optional()
    optional = left.optional or right.optional
    if left.kind == "null":
        return right.as_optional()
    if right.kind == "null":
        return left.as_optional()
    if left.kind == right.kind:
        if left.kind in ("list", "map"):
            return JsonType(left.kind, value=_fuse_values(left.value, right.value), optional=optional)
        if left.kind == "struct":
            lf, rf = left.fields or {}, right.fields or {}
            fields = {}
            for key in [*lf, *(k for k in rf if k not in lf)]:
                if key in lf and key in rf:
                    fields[key] = fuse_type(lf[key], rf[key])
                else:
                    fields[key] = (lf.get(key) or rf[key]).as_optional()
            return JsonType("struct", fields=fields, optional=optional)
        return JsonType(left.kind, optional=optional)
    if left.kind == "map" and right.kind == "struct":
        return fuse_type(left, JsonType("map", value=_struct_value(right), optional=right.optional))
    if left.kind == "struct" and right.kind == "map":
        return fuse_type(JsonType("map", value=_struct_value(left), optional=left.optional), right)
    return JsonType("json", optional=optional)


def _to_json(schema: JsonType) -> Any:
    if schema.kind in _SCALARS and schema.kind != "json" and not schema.optional:
        return schema.kind
    if schema.kind == "json" and not schema.optional:
        return "json"
    payload: dict[str, Any] = {"type": schema.kind}
    if schema.optional:
        payload["optional"] = True
    if schema.kind in ("list", "map"):
        payload["value"] = _to_json(schema.value) if schema.value else "json"
    elif schema.kind == "struct":
        payload["fields"] = {key: _to_json(item) for key, item in (schema.fields or {}).items()}
    return payload


def schema_to_json(schema: JsonType | None) -> Any:
    """``config.types`` for ``schema``: a struct as ``{field: type}``, anything else as one type."""
    if schema is None:
        return None
    if schema.kind == "struct":
        return {key: _to_json(item) for key, item in (schema.fields or {}).items()}
    return _to_json(schema)


def _from_json(obj: Any) -> JsonType:
    if isinstance(obj, str):
        return JsonType(obj)
    if not isinstance(obj, dict):
        return JsonType("json")
    kind = obj.get("type") or obj.get("kind")
    if kind is None:
        return JsonType("struct", fields={key: _from_json(item) for key, item in obj.items()})
    optional = bool(obj.get("optional", False))
    if kind in ("list", "map"):
        return JsonType(kind, value=_from_json(obj.get("value", "json")), optional=optional)
    if kind == "struct":
        fields = obj.get("fields") or {}
        return JsonType("struct", fields={k: _from_json(v) for k, v in fields.items()}, optional=optional)
    return JsonType(str(kind), optional=optional)


def _schema_from_json(obj: Any) -> JsonType | None:
    if obj is None:
        return None
    if isinstance(obj, dict) and "type" not in obj and "kind" not in obj:
        return JsonType("struct", fields={key: _from_json(item) for key, item in obj.items()})
    return _from_json(obj)


def fuse_schema_json(left: Any, right: Any) -> Any:
    """Fuse two recorded ``config.types`` values (merging the partial indexes of several workers)."""
    if left is None:
        return right
    if right is None:
        return left
    return schema_to_json(fuse_type(_schema_from_json(left), _schema_from_json(right)))


def _is_json_row(value: Any) -> bool:
    if value is None or isinstance(value, (bool, int, float, str, bytes, bytearray)):
        return True
    if isinstance(value, JsonLeaf):
        return _is_json_row(value.value)
    if isinstance(value, list):
        return all(_is_json_row(item) for item in value)
    if isinstance(value, dict):
        return all(_is_json_row(item) for item in value.values())
    return False


def wrap_for_pytree(sample: dict[Any, Any], schema: JsonType, keys: list[Any] | None = None) -> dict[Any, Any]:
    """``sample`` with its list / map / json fields wrapped as :class:`JsonLeaf` (see the module docstring).

    Args:
        sample: A ``dict`` sample.
        schema: The fused type so far (this sample included), a struct.
        keys: The first sample's key order (later samples are put in that order); ``None`` for the
            fused field order.
    """
    fields = schema.fields or {}
    order = [k for k in (keys if keys is not None else fields) if k in sample]
    order += [k for k in sample if k not in set(order)]
    out = {}
    for key in order:
        value, field_type = sample[key], fields.get(key)
        if isinstance(value, JsonLeaf):
            value = value.value
        out[key] = value if field_type is None else _wrap(value, field_type)
    return out


def _wrap(value: Any, schema: JsonType) -> Any:
    if schema.kind in ("list", "map", "json"):
        # lists of images or tensors stay pytree nodes (LitData: they are not plain JSON)
        return JsonLeaf(value) if value is not None and _is_json_row(value) else value
    if schema.kind == "struct" and type(value) is dict:
        return wrap_for_pytree(value, schema)
    return value
