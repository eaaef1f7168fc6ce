"""Flatten samples into leaves and rebuild them: the pytree rules and ``data_spec`` string of LitData.

A sample is a tree whose inner nodes are ``tuple``, ``list``, ``dict``, ``OrderedDict``,
``defaultdict`` and ``deque``; everything else (numbers, strings, arrays, tensors, images, ``None``,
dataclasses) is a leaf, and so is a non-empty list or tuple of JPEG images (LitData's ``jpeg_array``).
Leaves are visited depth-first, dict values in the dict's own key order.

The structure is stored in ``index.json`` as ``config.data_spec``, a JSON string of
``[1, node]`` where each node is ``{"type": ..., "context": ..., "children_spec": [...]}`` with
LitData's type names and context encodings (spec/format-and-write.md §4.2)::

    leaf         {"type": null, "context": null, "children_spec": []}
    tuple/list   {"type": "builtins.tuple" | "builtins.list", "context": "null", ...}
    dict         {"type": "builtins.dict", "context": "[\\"a\\", \\"b\\"]", ...}   (keys as a JSON string)
    OrderedDict  {"type": "collections.OrderedDict", ...}                        (as dict)
    deque        {"type": "collections.deque", "context": "<maxlen as JSON>", ...}
    defaultdict  {"type": "collections.defaultdict", "context": {"default_factory_module": m,
                  "default_factory_name": n, "dict_context": [keys]}, ...}

Namedtuples are rejected with a :class:`~litstream.FormatError` (LitData cannot name them either).
"""

from __future__ import annotations

import importlib
import json
from collections import OrderedDict, defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

from .._core._errors import FormatError
from ._image_types import is_jpeg_list

__all__ = [
    "TreeSpec",
    "factory_modules",
    "leaf_paths",
    "spec_from_json",
    "spec_outline",
    "spec_to_json",
    "tree_flatten",
    "tree_unflatten",
]

_TUPLE = "builtins.tuple"
_LIST = "builtins.list"
_DICT = "builtins.dict"
_ODICT = "collections.OrderedDict"
_DDICT = "collections.defaultdict"
_DEQUE = "collections.deque"


@dataclass(frozen=True)
class TreeSpec:
    """The shape of a sample: a node type (``None`` for a leaf), its context and its children.

    ``context`` holds the dict keys (a tuple), the deque ``maxlen``, or for ``defaultdict`` a
    ``(factory_module, factory_name, keys)`` triple. ``num_leaves`` counts the leaves below.
    """

    type: str | None
    context: Any = None
    children: tuple[TreeSpec, ...] = ()
    num_leaves: int = field(default=1, compare=False)

    @property
    def is_leaf(self) -> bool:
        return self.type is None


_LEAF = TreeSpec(None)


def _node(kind: str, context: Any, children: list[TreeSpec]) -> TreeSpec:
    return TreeSpec(kind, context, tuple(children), sum(c.num_leaves for c in children))


def tree_flatten(sample: Any) -> tuple[list[Any], TreeSpec]:
    """Split ``sample`` into its leaves (depth-first) and its structure.

    Raises:
        FormatError: ``sample`` contains a namedtuple.
    """
    leaves: list[Any] = []
    spec = _flatten(sample, leaves)
    return leaves, spec


def _flatten(obj: Any, leaves: list[Any]) -> TreeSpec:
    kind = type(obj)
    if (kind is tuple or kind is list) and not is_jpeg_list(obj):  # a list of JPEGs is one leaf, as in LitData
        children = [_flatten(x, leaves) for x in obj]
        return _node(_TUPLE if kind is tuple else _LIST, None, children)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        raise FormatError(
            f"cannot store the namedtuple {type(obj).__qualname__!r} in a sample: its type cannot be "
            "recorded in index.json; convert it with `._asdict()` or to a plain tuple"
        )
    if kind is dict or kind is OrderedDict:
        keys = tuple(obj.keys())
        children = [_flatten(obj[k], leaves) for k in keys]
        return _node(_DICT if kind is dict else _ODICT, keys, children)
    if kind is defaultdict:
        factory = obj.default_factory
        keys = tuple(obj.keys())
        children = [_flatten(obj[k], leaves) for k in keys]
        ctx = (
            getattr(factory, "__module__", None),
            getattr(factory, "__qualname__", None),
            keys,
        )
        return _node(_DDICT, ctx, children)
    if kind is deque:
        children = [_flatten(x, leaves) for x in obj]
        return _node(_DEQUE, obj.maxlen, children)
    leaves.append(obj)
    return _LEAF


def tree_unflatten(leaves: list[Any], spec: TreeSpec) -> Any:
    """Rebuild a sample from ``leaves`` (as returned by :func:`tree_flatten`) and ``spec``.

    Raises:
        FormatError: ``len(leaves)`` differs from ``spec.num_leaves``.
    """
    if len(leaves) != spec.num_leaves:
        raise FormatError(f"the data_spec describes {spec.num_leaves} leaves but {len(leaves)} were decoded")
    it = iter(leaves)
    return _build(spec, it)


def _build(spec: TreeSpec, it: Any) -> Any:
    if spec.type is None:
        return next(it)
    values = [_build(c, it) for c in spec.children]
    if spec.type == _TUPLE:
        return tuple(values)
    if spec.type == _LIST:
        return values
    if spec.type == _DICT:
        return dict(zip(spec.context, values, strict=False))
    if spec.type == _ODICT:
        return OrderedDict(zip(spec.context, values, strict=False))
    if spec.type == _DEQUE:
        return deque(values, maxlen=spec.context)
    module, name, keys = spec.context
    factory = _resolve_factory(module, name)
    return defaultdict(factory, zip(keys, values, strict=False))


def _resolve_factory(module: str | None, name: str | None) -> Any:
    if module is None or name is None:
        return None
    try:
        target: Any = importlib.import_module(module)
        for part in name.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError, ValueError, TypeError) as exc:
        raise FormatError(f"config.data_spec: defaultdict factory {module}.{name} cannot be found: {exc}") from exc
    return target


def factory_modules(spec: TreeSpec) -> set[str]:
    """The modules that rebuilding samples of ``spec`` imports (``defaultdict`` factories)."""
    found = {spec.context[0]} if spec.type == _DDICT and spec.context[0] is not None else set()
    for child in spec.children:
        found |= factory_modules(child)
    return found


def _dict_keys(spec: TreeSpec) -> tuple[Any, ...] | None:
    if spec.type in (_DICT, _ODICT):
        return tuple(spec.context)
    if spec.type == _DDICT:
        return tuple(spec.context[2])
    return None


def spec_outline(spec: TreeSpec, limit: int = 200) -> str:
    """``spec`` as a short Python-like skeleton for error messages: ``{'a': _, 'b': [_, _]}`` (``_``: a leaf).

    Longer than ``limit`` characters, the outline is cut and ends with ``...``.
    """
    text = _outline(spec)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _outline(spec: TreeSpec) -> str:
    if spec.is_leaf:
        return "_"
    inner = [_outline(c) for c in spec.children]
    keys = _dict_keys(spec)
    if keys is not None:
        return "{" + ", ".join(f"{k!r}: {v}" for k, v in zip(keys, inner, strict=True)) + "}"
    if spec.type == _TUPLE:
        return "(" + ", ".join(inner) + ("," if len(inner) == 1 else "") + ")"
    if spec.type == _DEQUE:
        return "deque([" + ", ".join(inner) + "])"
    return "[" + ", ".join(inner) + "]"


def leaf_paths(spec: TreeSpec) -> list[str]:
    """Where each leaf of ``spec`` sits, in leaf order, as an expression: ``sample['a'][1]`` (``sample`` for a leaf)."""
    paths: list[str] = []
    _paths(spec, "sample", paths)
    return paths


def _paths(spec: TreeSpec, prefix: str, out: list[str]) -> None:
    if spec.is_leaf:
        out.append(prefix)
        return
    keys = _dict_keys(spec)
    for position, child in enumerate(spec.children):
        _paths(child, f"{prefix}[{keys[position]!r}]" if keys is not None else f"{prefix}[{position}]", out)


def spec_to_json(spec: TreeSpec) -> str:
    """Encode ``spec`` as LitData's ``data_spec`` string (``json.dumps([1, node])``)."""
    return json.dumps([1, _to_obj(spec)])


def _to_obj(spec: TreeSpec) -> dict[str, Any]:
    context: Any
    if spec.type is None:
        context = None
    elif spec.type in (_TUPLE, _LIST):
        context = "null"
    elif spec.type in (_DICT, _ODICT):
        context = json.dumps(list(spec.context))
    elif spec.type == _DEQUE:
        context = json.dumps(spec.context)
    else:
        module, name, keys = spec.context
        context = {"default_factory_module": module, "default_factory_name": name, "dict_context": list(keys)}
    return {"type": spec.type, "context": context, "children_spec": [_to_obj(c) for c in spec.children]}


def spec_from_json(text: str) -> TreeSpec:
    """Decode a ``data_spec`` string written by LitData or litstream.

    Raises:
        FormatError: the string is not protocol 1 or names an unknown node type.
    """
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(f"config.data_spec is not valid JSON: {text[:80]!r}") from exc
    if not (isinstance(payload, list) and len(payload) == 2 and payload[0] == 1):
        raise FormatError(f"config.data_spec must be `[1, node]` (treespec protocol 1), got {text[:80]!r}")
    try:
        return _from_obj(payload[1])
    except FormatError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as exc:  # a stranger's index
        raise FormatError(f"config.data_spec is malformed ({type(exc).__name__}: {exc}): {text[:80]!r}") from exc


def _keys(raw: Any, count: int) -> tuple[Any, ...]:
    keys = tuple(json.loads(raw) if isinstance(raw, str) else raw)
    if len(keys) != count or not all(k is None or isinstance(k, (str, int, float)) for k in keys):
        raise FormatError(f"config.data_spec: dict keys {keys!r} do not match its {count} children")
    return keys


def _from_obj(obj: dict[str, Any]) -> TreeSpec:
    kind = obj["type"]
    children = [_from_obj(c) for c in obj["children_spec"]]
    raw = obj["context"]
    if kind is None:
        return _LEAF
    if kind in (_TUPLE, _LIST):
        return _node(kind, None, children)
    if kind in (_DICT, _ODICT):
        return _node(kind, _keys(raw, len(children)), children)
    if kind == _DEQUE:
        maxlen = json.loads(raw)
        if maxlen is not None and (isinstance(maxlen, bool) or not isinstance(maxlen, int) or maxlen < 0):
            raise FormatError(f"config.data_spec: deque maxlen must be null or an int >= 0, got {maxlen!r}")
        return _node(kind, maxlen, children)
    if kind == _DDICT:
        module, name = raw["default_factory_module"], raw["default_factory_name"]
        if not all(part is None or isinstance(part, str) for part in (module, name)):
            raise FormatError(f"config.data_spec: defaultdict factory {module!r}.{name!r} is not a name")
        ctx = (module, name, _keys(raw["dict_context"], len(children)))
        return _node(kind, ctx, children)
    raise FormatError(f"config.data_spec names the node type {kind!r}, which litstream cannot rebuild")
