"""The ``Graph`` wrapper and the ``graph`` encoding: a PyG-style graph as packed tensors (LitData 0.2.76).

Payload (all integers big-endian)::

    b"LDGR" | u8 version (3) | u16 field count F
    F x ( u16 name length | UTF-8 name | u8 kind | u32 payload length | payload )

Tensor fields (kind 0) hold one ``tensor`` payload each (:mod:`._serializers`: BE dtype index, BE
rank, BE dims, little-endian values); the last field, ``_meta`` (kind 1), is a pickle of
``{"_cls": "data" | "hetero", "_tree": nested dict with "__ldgr_t__" where tensors were, "_paths":
[key tuples], "_fields": [names]}``. Versions 1 (u8 counts, no kind byte) and 2 (u8 counts) read too.
The ``_meta`` pickle is read with an unpickler that builds only plain containers and scalars (no
class is ever loaded), so a ``graph`` payload cannot run code.

A graph with no tensors, or holding lists, goes to ``"graph:pickle"``: a pickle of the object, which
LitData (and litstream) resolve to the ``pickle`` encoding.

Decodes to ``torch_geometric.data.Data`` / ``HeteroData`` (``from_dict``) when PyG is installed,
else to a :class:`Graph` (fields ``x``, ``edge_index``, ... set; other keys in ``data``), like LitData.
"""

from __future__ import annotations

import importlib
import io
import pickle
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._core._errors import FormatError, SampleTypeError
from .._serializer_base import Serializer, loaded_class

__all__ = ["GRAPH_FIELDS", "Graph", "GraphSerializer", "is_pyg_data"]

GRAPH_FIELDS = ("x", "edge_index", "edge_attr", "y", "pos", "batch")
_MAGIC = b"LDGR"
_MARK = "__ldgr_t__"
_META = "_meta"


def is_pyg_data(item: object) -> bool:
    """Whether ``item`` is a PyG ``Data`` / ``HeteroData`` / ``Batch`` (has ``to_dict``)."""
    return getattr(type(item), "__module__", "").startswith("torch_geometric.data") and hasattr(item, "to_dict")


@dataclass
class Graph:
    """A graph sample (LitData's ``litdata.types.Graph``), stored as packed tensors.

    Args:
        x, edge_index, edge_attr, y, pos, batch: Tensors or arrays (PyG's field names).
        data: A PyG ``Data``/``HeteroData`` or a dict (its entries, overridden by the fields above),
            or any other object, which is pickled (and then no field may be set).
    """

    x: Any = None
    edge_index: Any = None
    edge_attr: Any = None
    y: Any = None
    pos: Any = None
    batch: Any = None
    data: Any = None

    def to_mapping(self) -> dict[str, Any]:
        """The flat mapping that is stored (fields override ``data``); empty for an opaque ``data``.

        Raises:
            SampleTypeError: an opaque ``data`` is mixed with tensor fields (a ``TypeError``, as in LitData).
        """
        mapping: dict[str, Any] = {}
        if self.data is not None and is_pyg_data(self.data):
            mapping.update(self.data.to_dict())
        elif isinstance(self.data, dict):
            mapping.update(self.data)
        elif self.data is not None:
            if any(getattr(self, name) is not None for name in GRAPH_FIELDS):
                raise SampleTypeError(
                    f"Graph(data=<{type(self.data).__name__}>) cannot be combined with tensor fields "
                    f"({', '.join(n for n in GRAPH_FIELDS if getattr(self, n) is not None)}): pass data= as a PyG "
                    "Data or a dict, or drop the fields"
                )
            return mapping
        mapping.update({name: getattr(self, name) for name in GRAPH_FIELDS if getattr(self, name) is not None})
        return mapping

    def to_pyg(self) -> Any:
        """``Data.from_dict`` / ``HeteroData.from_dict`` of :meth:`to_mapping` (needs the ``graph`` extra)."""
        from ._base import require

        data = require("torch_geometric.data", "graph", "Graph.to_pyg()")
        mapping = self.to_mapping()
        hetero = any(isinstance(v, dict) and any(hasattr(c, "shape") for c in v.values()) for v in mapping.values())
        return (data.HeteroData if hetero else data.Data).from_dict(mapping)


def _is_tensor_like(value: object) -> bool:
    from ._tensor import Tensor

    torch_tensor = loaded_class("torch", "Tensor")
    return isinstance(value, (Tensor, np.ndarray)) or (torch_tensor is not None and isinstance(value, torch_tensor))


def _flatten(obj: Any, prefix: tuple[Any, ...], tensors: dict[tuple[Any, ...], Any]) -> Any:
    """The tree with tensors replaced by the mark (collected into ``tensors``); ``None`` for lists."""
    if _is_tensor_like(obj):
        tensors[prefix] = obj
        return _MARK
    if isinstance(obj, dict):
        tree = {}
        for key, value in obj.items():
            child = _flatten(value, (*prefix, key), tensors)
            if child is None:
                return None
            tree[key] = child
        return tree
    if isinstance(obj, (list, tuple, set)):
        return None
    return obj


def _name(path: tuple[Any, ...]) -> str:
    return ".".join("__".join(str(p) for p in key) if isinstance(key, tuple) else str(key) for key in path)


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise FormatError(f"graph metadata refers to {module}.{name}; only plain values are allowed")


def _fill(tree: Any, tensors: dict[tuple[Any, ...], Any], prefix: tuple[Any, ...] = ()) -> Any:
    if tree == _MARK:
        return tensors[prefix]
    if isinstance(tree, dict):
        return {key: _fill(value, tensors, (*prefix, key)) for key, value in tree.items()}
    return tree


def _rebuild(values: dict[str, Any]) -> Any:
    tree, paths, names = values.pop("_tree", None), values.pop("_paths", None), values.pop("_fields", None)
    cls = values.pop("_cls", "data")
    if tree is not None and paths is not None and names is not None:
        try:
            by_path = {tuple(path): values[name] for path, name in zip(paths, names, strict=True)}
            values = _fill(tree, by_path)
        except (KeyError, TypeError, ValueError) as exc:
            raise FormatError(f"graph metadata does not match its tensor fields: {exc}") from exc
    try:
        pyg = importlib.import_module("torch_geometric.data")
    except ImportError:
        if cls == "hetero":
            return Graph(data=values)
        known = {name: values.pop(name) for name in list(values) if name in GRAPH_FIELDS}
        return Graph(**known, data=values or None)
    return (pyg.HeteroData if cls == "hetero" else pyg.Data).from_dict(values)


class GraphSerializer(Serializer):
    """``Graph`` wrappers and PyG ``Data`` / ``HeteroData`` objects (``"graph"``; see the module docstring)."""

    name = "graph"

    def can_serialize(self, obj: object) -> bool:
        return isinstance(obj, Graph) or is_pyg_data(obj)

    def serialize(self, obj: Any) -> tuple[bytes, str | None]:
        from .._object_serializers import PickleSerializer, TensorSerializer
        from ._tensor import as_torch_tensor

        if is_pyg_data(obj):
            mapping, cls = dict(obj.to_dict()), ("hetero" if type(obj).__name__ == "HeteroData" else "data")
        else:
            mapping = obj.to_mapping()
            hetero = any(isinstance(v, dict) and any(_is_tensor_like(c) for c in v.values()) for v in mapping.values())
            cls = (
                ("hetero" if type(obj.data).__name__ == "HeteroData" else "data")
                if is_pyg_data(obj.data)
                else ("hetero" if hetero else "data")
            )
        tensors: dict[tuple[Any, ...], Any] = {}
        tree = _flatten(mapping, (), tensors) if mapping else None
        if tree is None or not tensors:
            opaque = obj.data if isinstance(obj, Graph) and obj.data is not None else obj
            return PickleSerializer().serialize(opaque)[0], "graph:pickle"
        paths = list(tensors)
        names = [_name(path) for path in paths]
        if len(set(names)) != len(names):
            names = [f"t{i}" for i in range(len(paths))]
        fields = [
            (name.encode(), 0, TensorSerializer().serialize(as_torch_tensor(tensors[path]).cpu().contiguous())[0])
            for name, path in zip(names, paths, strict=True)
        ]
        meta = {"_cls": cls, "_tree": tree, "_paths": paths, "_fields": names}
        fields.append((_META.encode(), 1, pickle.dumps(meta)))
        if len(fields) > 0xFFFF or any(len(n) > 0xFFFF for n, _, _ in fields):
            raise FormatError("a graph has more than 65535 fields or a field name over 65535 bytes")
        parts = [_MAGIC, struct.pack(">BH", 3, len(fields))]
        for name_b, kind, payload in fields:
            parts.append(struct.pack(">H", len(name_b)) + name_b + struct.pack(">BI", kind, len(payload)) + payload)
        return b"".join(parts), "graph"

    def deserialize(self, data: bytes | memoryview) -> Any:
        from .._object_serializers import TensorSerializer

        view = memoryview(data)
        if bytes(view[:4]) != _MAGIC:
            raise FormatError("graph payload does not start with b'LDGR'")
        try:
            version = view[4]
            if version not in (1, 2, 3):
                raise FormatError(f"unsupported graph pack version {version}")
            wide = version >= 3
            (count,), offset = struct.unpack_from(">H" if wide else ">B", view, 5), (7 if wide else 6)
            values: dict[str, Any] = {}
            for _ in range(count):
                (length,) = struct.unpack_from(">H" if wide else ">B", view, offset)
                offset += 2 if wide else 1
                name = bytes(view[offset : offset + length]).decode()
                offset += length
                kind = view[offset] if version >= 2 else 0
                offset += 1 if version >= 2 else 0
                (size,) = struct.unpack_from(">I", view, offset)
                payload = view[offset + 4 : offset + 4 + size]
                if len(payload) != size:
                    raise FormatError(f"graph field {name!r} runs past the end of the payload")
                offset += 4 + size
                if kind == 1 or name == _META:
                    meta = _PlainUnpickler(io.BytesIO(bytes(payload))).load()
                    if not isinstance(meta, dict):
                        raise FormatError("graph metadata is not a dict")
                    values.update(meta)
                else:
                    values[name] = TensorSerializer().deserialize(payload)
        except (struct.error, IndexError, UnicodeDecodeError, pickle.UnpicklingError, EOFError) as exc:
            raise FormatError(f"invalid graph payload ({len(view)} bytes): {exc}") from exc
        return _rebuild(values)
