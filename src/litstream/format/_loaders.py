"""Item encoding of the default loader (LitData's ``PyTreeLoader``): sample ⇄ item bytes.

An item holding a sample with L leaves (L = ``len(config.data_format)``)::

    uint32 LE size of leaf 0 | ... | uint32 LE size of leaf L-1 | payload 0 | ... | payload L-1

No type tag is stored per item: leaf ``i`` is decoded by the serializer named ``data_format[i]``,
and the structure is rebuilt from ``data_spec`` (see :mod:`._pytree`). The first sample a writer
sees fixes ``data_format`` and ``data_spec``; unlike LitData, later samples are checked against it
and a mismatch raises instead of silently writing swapped or truncated fields.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

import numpy as np

from .._core._errors import ConfigurationError, FormatError, PickleRefusedError
from ._batch_decode import ColumnBatch, decode_items, sample_builder
from ._fast_encode import fast_encoder
from ._json_serializer import JsonLeaf
from ._loader_hooks import PyTreeHooks, TokensHooks
from ._pytree import (
    TreeSpec,
    factory_modules,
    leaf_paths,
    spec_from_json,
    spec_outline,
    spec_to_json,
    tree_flatten,
    tree_unflatten,
)
from ._serializers import (
    PickleSerializer,
    Serializer,
    default_serializers,
    select_serializer,
    serializer_for_format,
)
from ._types import JsonType, fuse_type, infer_type, schema_to_json, wrap_for_pytree
from .media._registry import MEDIA_KEYS

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from ._index import DatasetConfig

__all__ = ["PyTreeLoader", "SampleDecoder", "SampleEncoder", "TokensLoader", "refuse_unsafe_leaves"]


# values whose inferred type depends on their content, not only on their class (see ._types.infer_type)
_CONTENT_TYPED = (list, dict, type(None), JsonLeaf)


class PyTreeLoader(PyTreeHooks):
    """The default item loader: each item is one pytree sample (LitData's ``PyTreeLoader``).

    Pass an instance as ``item_loader=`` to ``optimize`` or ``StreamingDataset``; its class name is
    what ``index.json`` records in ``config.item_loader``.
    """

    def state_dict(self) -> dict[str, Any]:
        """Loader state stored in checkpoints: empty for this loader, as in LitData."""
        return {}

    def __repr__(self) -> str:
        return "PyTreeLoader()"


class TokensLoader(TokensHooks):
    """The token loader for language-model pre-training (LitData's ``TokensLoader``).

    Writing (``optimize(..., item_loader=TokensLoader())``): every sample is one 1-D NumPy array or
    torch tensor of token ids (any integer or float dtype of the format's tables; the first sample
    fixes it). Arrays are stored back to back without per-array headers, ``index.json`` records
    each chunk's token count as ``dim``, and ``chunk_size`` counts **tokens** rather than arrays.

    Reading (``StreamingDataset(d, item_loader=TokensLoader(block_size=B))``, ``astream``): each
    chunk is cut into ``dim // B`` consecutive windows of ``B`` tokens, ignoring array boundaries;
    the last ``dim % B`` tokens of every chunk are never served and windows never span two chunks.
    Each window is a new 1-D ``torch.Tensor`` (data written from tensors) or ``np.ndarray`` (data
    written from NumPy arrays) of length ``B``, exactly as LitData returns it. Windows are the
    dataset's items: ``len``, sharding, shuffling, ``ds[i]`` and resume all count windows.
    Byte layout: :mod:`litstream.format._tokens`.

    Args:
        block_size: Tokens per window when reading (``>= 1``); ``None`` (default) is enough for
            writing. Not stored in ``index.json``.

    Raises:
        ConfigurationError: ``block_size`` is not ``None`` or a positive int.
    """

    def __init__(self, block_size: int | None = None) -> None:
        if block_size is not None and (
            isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1
        ):
            raise ConfigurationError(
                f"block_size must be a positive int (tokens per item) or None, got {block_size!r}; "
                "e.g. TokensLoader(block_size=2049)"
            )
        self.block_size = block_size

    def state_dict(self) -> dict[str, Any]:
        """Loader state stored in checkpoints: ``{"block_size": block_size}``, as in LitData."""
        return {"block_size": self.block_size}

    def __repr__(self) -> str:
        return f"TokensLoader(block_size={self.block_size!r})"


def _registry(serializers: Mapping[str, Serializer] | None, *, media: bool = True) -> dict[str, Serializer]:
    registry = default_serializers(media=media)
    if serializers:
        # User serializers come first; one with a built-in key replaces it (LitData's rule).
        for key, serializer in serializers.items():
            registry.pop(key, None)
            if not isinstance(getattr(serializer, "name", None), str):  # LitData's serializers have no name:
                serializer.name = key  # the registry key is their data format
        registry = {**dict(serializers), **registry}
    return registry


def _reader_registry(serializers: Mapping[str, Serializer] | None, formats: Sequence[str]) -> dict[str, Serializer]:
    """:func:`_registry` for decoding ``formats``: without the media encodings when no format names one of their
    keys and every format resolves without them (it then resolves to the same serializers)."""
    if not any(part in MEDIA_KEYS for name in formats for part in name.split(":")):
        lean = _registry(serializers, media=False)
        if all(name.partition(":")[0] in lean for name in formats):
            return lean
    return _registry(serializers)


_SAFE_FACTORY_MODULES = ("builtins", "collections")


def refuse_unsafe_leaves(
    serializers: Sequence[Serializer], data_format: Sequence[str], spec: TreeSpec | None, where: str
) -> None:
    """Raise unless decoding with ``serializers`` and ``spec`` runs no ``pickle.loads`` and imports nothing.

    Raises:
        PickleRefusedError: naming the first pickled leaf (or the module), ``where`` and the fix.
    """
    for position, serializer in enumerate(serializers):
        if isinstance(serializer, PickleSerializer):
            raise PickleRefusedError(
                f"{where} stores leaf {position} ({data_format[position]!r}) with pickle, and allow_pickle is off: "
                "unpickling runs code chosen by whoever wrote the data. If you trust its source, pass "
                "allow_pickle=True (or call litstream.set_allow_pickle(True)); see docs/security.md"
            )
    modules = sorted(m for m in (factory_modules(spec) if spec is not None else ()) if m not in _SAFE_FACTORY_MODULES)
    if modules:
        raise PickleRefusedError(
            f"{where} names defaultdict factories from {modules}, which would be imported, and allow_pickle is "
            "off. If you trust its source, pass allow_pickle=True; see docs/security.md"
        )


class SampleEncoder:
    """Turns samples into item bytes; the first sample fixes the format.

    Args:
        serializers: Extra serializers by registry key, tried before the built-ins.
        allow_pickle: ``False`` refuses a first sample with a leaf that only the built-in ``pickle``
            serializer can store (:class:`~litstream.PickleRefusedError`). Default ``True``.
        json_leaves: Store the list and dict fields of ``dict`` samples as ``json`` leaves (LitData
            0.2.76); ``False`` flattens them as LitData <= 0.2.75 did (to append to such a dataset).
        fast_path: Encode flat samples of simple leaves by a precompiled packer (same bytes); ``False``
            always takes the general path (the reference the fast path is tested against). Default ``True``.
    """

    def __init__(
        self,
        serializers: Mapping[str, Serializer] | None = None,
        *,
        allow_pickle: bool = True,
        json_leaves: bool = True,
        fast_path: bool = True,
    ) -> None:
        self._fast_path = fast_path
        self._json_leaves = json_leaves
        self._registry = _registry(serializers)
        self._allow_pickle = allow_pickle
        self._spec: TreeSpec | None = None
        self._serializers: list[Serializer] = []
        self.data_format: tuple[str, ...] = ()
        self.data_spec: str | None = None
        self._fast: Callable[[Any], bytes | None] | None = None
        self._types: JsonType | None = None
        self._keys: list[Any] | None = None
        self._plain: tuple[tuple[Any, ...], tuple[type, ...]] | None = None

    @property
    def types(self) -> Any:
        """``config.types``: the fused type of every sample encoded so far (see :mod:`._types`)."""
        return schema_to_json(self._types)

    def encode(self, sample: Any) -> bytes:
        """Encode ``sample`` as one item.

        As LitData 0.2.76, the list and dict fields of a ``dict`` sample are stored as one ``json`` leaf
        each (see :mod:`._types`); other samples are flattened completely.

        Raises:
            FormatError: the sample's structure differs from the first sample's, or a leaf cannot
                be serialized (the message names the leaf position and its type).
        """
        if type(sample) is not dict:
            inferred = infer_type(sample)
            self._types = inferred if self._types is None else fuse_type(self._types, inferred)
        elif (tuple(sample), tuple(map(type, sample.values()))) != self._plain:
            # not the same keys and value types as the last flat sample: infer, fuse and wrap
            inferred = infer_type(sample)
            self._types = inferred if self._types is None else fuse_type(self._types, inferred)
            if self._json_leaves:
                sample = wrap_for_pytree(sample, self._types, self._keys)
                if self._keys is None:
                    self._keys = list(sample)
            if not any(type(v) in _CONTENT_TYPED for v in sample.values()):
                # every value's type says all: later samples with this signature change neither the
                # fused types nor the wrapping (idempotent), so they skip both
                self._plain = (tuple(sample), tuple(map(type, sample.values())))
        if self._fast is not None:  # same bytes as below, for flat samples of simple leaves
            item = self._fast(sample)
            if item is not None:
                return item
        leaves, spec = tree_flatten(sample)
        if self._spec is None:
            self._fix_format(leaves, spec)
        elif spec != self._spec:
            raise FormatError(
                f"sample structure {spec_outline(spec)} differs from the first sample's {spec_outline(self._spec)} "
                "(_ is a leaf); every sample must have the same keys and nesting"
            )
        payloads = []
        for position, (leaf, serializer) in enumerate(zip(leaves, self._serializers, strict=False)):
            if isinstance(leaf, JsonLeaf) and serializer.name != "json":
                leaf = leaf.value  # the first sample fixed another format (e.g. None, then a list)
            if not serializer.accepts(leaf):
                raise FormatError(
                    f"leaf {position} of the sample ({self._where(position)}) is a {type(leaf).__name__}, which the "
                    f"{self.data_format[position]!r} format fixed by the first sample cannot store; "
                    "keep types the same in every sample"
                )
            data, name = self._serialized(position, serializer, leaf, first=False)
            recorded = name or serializer.name
            fixed = self.data_format[position]
            if recorded != fixed and not serializer.same_format(recorded, fixed):
                raise FormatError(
                    f"leaf {position} of the sample ({self._where(position)}) encodes as {recorded!r} but the first "
                    f"sample fixed {self.data_format[position]!r}; keep dtypes and types the same in every sample"
                )
            payloads.append(data)
        sizes = np.fromiter((len(p) for p in payloads), dtype="<u4", count=len(payloads))
        return b"".join((sizes.tobytes(), *payloads))

    def encode_item(self, sample: Any) -> tuple[bytes, int | None]:
        """``(encode(sample), None)``: the item and its token count, which this loader has not."""
        return self.encode(sample), None

    def _where(self, position: int) -> str:
        """The path of leaf ``position`` of the fixed structure, e.g. ``sample['image']``, for error messages."""
        paths = leaf_paths(self._spec) if self._spec is not None else []
        return paths[position] if position < len(paths) else f"leaf {position}"

    def _serialized(self, position: int, serializer: Serializer, leaf: Any, *, first: bool) -> tuple[bytes, str | None]:
        """``serializer.serialize(leaf)`` for leaf ``position`` of a sample (``first``: of the first sample, whose
        leaves fix the formats).

        Raises:
            FormatError: the serializer raised one (as it is), or any other exception (chained to it).
        """
        try:
            return serializer.serialize(leaf)
        except FormatError:
            raise
        except Exception as exc:
            if first:
                raise FormatError(
                    f"leaf {position} of the first sample ({type(leaf).__name__}) cannot be serialized: {exc}"
                ) from exc
            raise FormatError(
                f"leaf {position} of the sample ({self._where(position)}, a {type(leaf).__name__}) cannot be "
                f"written with the {self.data_format[position]!r} serializer fixed by the first sample: {exc}"
            ) from exc

    def _fix_format(self, leaves: list[Any], spec: TreeSpec) -> None:
        formats = []
        serializers = []
        for position, leaf in enumerate(leaves):
            serializer = select_serializer(leaf, self._registry)
            if not self._allow_pickle and isinstance(serializer, PickleSerializer):
                raise PickleRefusedError(
                    f"leaf {position} of the first sample is a {type(leaf).__qualname__}, which only pickle can "
                    "store, and allow_pickle=False: convert it (to a str, number, bytes, array or tensor) or "
                    "pass allow_pickle=True"
                )
            _, name = self._serialized(position, serializer, leaf, first=True)
            formats.append(name or serializer.name)
            serializers.append(serializer)
        self._spec, self._serializers = spec, serializers
        self.data_format, self.data_spec = tuple(formats), spec_to_json(spec)
        self._fast = fast_encoder(spec, serializers) if self._fast_path else None


class SampleDecoder:
    """Turns item bytes back into samples for one dataset config.

    Args:
        config: The dataset's ``index.json`` config.
        serializers: Extra serializers by registry key, tried before the built-ins.
        allow_pickle: ``False`` refuses, here and before anything is decoded, a dataset whose leaves
            are decoded by the built-in ``pickle`` serializer or whose ``data_spec`` would import a
            module other than ``builtins``/``collections`` (a ``defaultdict`` factory). Default ``True``.
        where: The dataset's location, for the message.

    Raises:
        FormatError: ``data_spec`` is missing or a ``data_format`` name is unknown.
        PickleRefusedError: ``allow_pickle=False`` and the dataset needs ``pickle.loads`` or an import.
    """

    def __init__(
        self,
        config: DatasetConfig,
        serializers: Mapping[str, Serializer] | None = None,
        *,
        allow_pickle: bool = True,
        where: str = "this dataset",
    ) -> None:
        if config.data_spec is None:
            raise FormatError("index.json config has no data_spec; this dataset needs a different item_loader")
        registry = _reader_registry(serializers, config.data_format)
        self._spec = spec_from_json(config.data_spec)
        self._serializers = [serializer_for_format(name, registry) for name in config.data_format]
        if not allow_pickle:
            refuse_unsafe_leaves(self._serializers, config.data_format, self._spec, where)
        self._num_leaves = len(self._serializers)
        self._sizes = struct.Struct(f"<{self._num_leaves}I")
        self._build = sample_builder(self._spec)
        flat = self._spec.type == "builtins.dict" and all(child.type is None for child in self._spec.children)
        self._keys: tuple[Any, ...] | None = tuple(self._spec.context) if flat and self._spec.children else None
        if self._num_leaves != self._spec.num_leaves:
            raise FormatError(
                f"config.data_format lists {self._num_leaves} leaves but data_spec describes {self._spec.num_leaves}"
            )

    def decode(self, item: bytes | memoryview) -> Any:
        """Decode one item (as stored in a chunk) into a sample.

        Raises:
            FormatError: the item is shorter than its size header announces.
        """
        n = self._num_leaves
        view = memoryview(item)
        if len(view) < 4 * n:
            raise FormatError(f"item of {len(view)} bytes is shorter than its {4 * n}-byte size header")
        sizes = self._sizes.unpack_from(view)
        position = 4 * n
        leaves = []
        for size, serializer in zip(sizes, self._serializers, strict=False):
            end = position + size
            if end > len(view):
                raise FormatError(f"item of {len(view)} bytes is shorter than its header announces ({end})")
            leaves.append(serializer.deserialize(view[position:end]))
            position = end
        return tree_unflatten(leaves, self._spec)

    def decode_many(
        self,
        data: Any,
        begins: np.ndarray[Any, Any],
        ends: np.ndarray[Any, Any],
        alloc: Callable[[int], np.ndarray[Any, Any]] | None = None,
    ) -> list[Any]:
        """Decode the items ``data[begins[k]:ends[k]]`` of one chunk (spans within ``data``), in order.

        Gives exactly ``[decode(data[b:e]) ...]`` (same values, types and errors), column by column
        with NumPy (:mod:`._batch_decode`); arrays are rows of one new array per call, whose memory
        ``alloc(nbytes)`` supplies when given (a writable 1-D uint8 array).
        """
        return decode_items(data, begins, ends, self._serializers, self._build, self.decode, alloc)  # type: ignore[no-any-return]

    # The parameters repeat decode_many's: both are public faces of the one decode_items (not duplicated logic).
    def decode_columns(
        self,
        data: Any,
        begins: np.ndarray[Any, Any],
        ends: np.ndarray[Any, Any],
        alloc: Callable[[int], np.ndarray[Any, Any]] | None = None,
    ) -> ColumnBatch | None:
        """Like :meth:`decode_many`, as a :class:`ColumnBatch` (no sample per item), for flat ``dict``
        samples; ``None`` for other samples or items that need the per-item decoder."""
        if self._keys is None:
            return None
        out = decode_items(data, begins, ends, self._serializers, self._build, self.decode, alloc, self._keys)
        return out if isinstance(out, ColumnBatch) else None
