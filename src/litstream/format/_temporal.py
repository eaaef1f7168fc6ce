"""LitData 0.2.76's temporal array records (``item_loader="TemporalArrayLoader"``): reading.

A record is one whole track: a dict of fixed-width numeric arrays sharing a leading frame axis ``T``.
Its item bytes (inside the usual chunk envelope) are::

    [T: uint32 little-endian][group 0: T rows][group 1: T rows]...

Each group is a run of ``T`` rows of a NumPy structured dtype built with ``align=True`` from the
group's fields (so rows carry C alignment padding); the groups, field dtypes (``dtype.str``), trailing
shapes, field order and whether a field was a torch tensor are recorded once in ``index.json`` as
``config.temporal_schema`` (``version`` 1). Chunks also list ``temporal_offsets`` / ``temporal_frames``
(LitData's window reads use them; whole-record reads here do not need them). Compression and
encryption are not allowed with this layout.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .._core._errors import ConfigurationError, FormatError
from ._loaders import PyTreeLoader

__all__ = ["TemporalArrayLoader", "TemporalDecoder"]

_MAX_FIELDS = 4096


class TemporalArrayLoader(PyTreeLoader):
    """LitData's item loader for temporal array tracks; litstream reads such datasets.

    ``StreamingDataset(d, item_loader=TemporalArrayLoader())`` (or the default loader: the index names
    the layout) yields each record as a dict of arrays, ``np.ndarray`` or ``torch.Tensor`` as written,
    in the recorded field order, identical to LitData's. Writing this layout is not implemented:
    ``optimize(..., item_loader=TemporalArrayLoader())`` raises ``ConfigurationError`` (write with
    LitData). LitData's window reads (``read_window``) are not available.

    Args:
        field_groups: Fields stored together, used by LitData when writing; validated here and kept.

    Raises:
        ConfigurationError: ``field_groups`` is not a list of non-empty lists of distinct names.
    """

    def __init__(self, field_groups: Sequence[Sequence[str]] | None = None) -> None:
        groups = [] if field_groups is None else field_groups
        bad = any(isinstance(g, str) or not isinstance(g, Sequence) or not g for g in groups)
        names = [] if bad else [n for g in groups for n in g]
        if bad or any(not isinstance(n, str) or not n for n in names) or len(set(names)) != len(names):
            raise ConfigurationError(
                f"field_groups must be a list of non-empty lists of distinct field names, got {field_groups!r}"
            )
        self.field_groups = [list(g) for g in groups]

    def __repr__(self) -> str:
        return f"TemporalArrayLoader(field_groups={self.field_groups!r})"


class TemporalDecoder:
    """Decodes the item bytes of a temporal dataset using ``config.temporal_schema``.

    Raises:
        FormatError: (constructor) the schema is missing or invalid; (``decode``) a record's length
            does not match its frame count.
    """

    def __init__(self, schema: object) -> None:
        if not isinstance(schema, Mapping) or schema.get("version") != 1:
            raise FormatError(f"index.json temporal_schema must be a version-1 object, got {schema!r:.200}")
        fields, order, groups = schema.get("fields"), schema.get("field_order"), schema.get("groups")
        if not isinstance(fields, Mapping) or not isinstance(order, list) or not isinstance(groups, list):
            raise FormatError("index.json temporal_schema lacks 'fields', 'field_order' or 'groups'")
        grouped = [n for g in groups if isinstance(g, list) for n in g]
        if (
            not order
            or len(order) > _MAX_FIELDS
            or len(set(map(str, order))) != len(order)
            or set(order) != set(fields)
            or any(not isinstance(g, list) or not g for g in groups)
            or sorted(map(str, grouped)) != sorted(map(str, order))
        ):
            raise FormatError("index.json temporal_schema: every field must be in field_order and in one group")
        self.order: list[str] = [str(n) for n in order]
        self.tensor = {n: bool(fields[n].get("tensor")) for n in self.order}
        self.groups: list[tuple[list[str], np.dtype[Any]]] = []
        for group in groups:
            parts = []
            for name in group:
                spec = fields[name]
                try:
                    dtype = np.dtype(spec["dtype"])
                    shape = tuple(spec["shape"])
                except (KeyError, TypeError, ValueError) as exc:
                    raise FormatError(
                        f"index.json temporal_schema field {name!r}: bad dtype or shape ({exc})"
                    ) from None
                if dtype.kind not in "biufc" or any(type(d) is not int or d < 1 for d in shape):
                    raise FormatError(f"index.json temporal_schema field {name!r}: unsupported {dtype} {shape}")
                if math.prod(shape) * dtype.itemsize > 2**30:
                    raise FormatError(f"index.json temporal_schema field {name!r}: a frame above 1 GiB")
                parts.append((name, dtype, shape))
            self.groups.append(([str(n) for n in group], np.dtype(parts, align=True)))
        self.frame_bytes = sum(dtype.itemsize for _, dtype in self.groups)

    def decode(self, raw: bytes | memoryview) -> dict[str, Any]:
        """One record as ``{field: array}`` in ``field_order``; tensors where the writer had tensors."""
        if len(raw) < 4:
            raise FormatError(f"a temporal record of {len(raw)} bytes is shorter than its 4-byte frame count")
        frames = int.from_bytes(bytes(raw[:4]), "little")
        if frames < 1 or len(raw) != 4 + frames * self.frame_bytes:
            raise FormatError(
                f"a temporal record of {len(raw)} bytes does not hold {frames} frames of {self.frame_bytes} bytes"
            )
        out: dict[str, Any] = {}
        cursor = 4
        for names, dtype in self.groups:
            rows = np.frombuffer(raw, dtype=dtype, count=frames, offset=cursor)
            cursor += frames * dtype.itemsize
            for name in names:
                out[name] = rows[name].copy()  # an independent, writable array of this field only
        if any(self.tensor.values()):
            import torch

            for name in self.order:
                if self.tensor[name]:
                    out[name] = torch.from_numpy(out[name])
        return {name: out[name] for name in self.order}
