"""The ``Mesh`` and ``Pdf`` wrappers and the ``mesh`` / ``pdf`` encodings (extras ``mesh`` and ``pdf``).

Payloads (LitData 0.2.76)::

    key   data_format        payload                 decodes to
    mesh  "mesh:<glb|ply|stl>"  the mesh file         trimesh.Trimesh / trimesh.Scene (trimesh.load)
    pdf   "pdf"              the PDF file            pdfplumber.PDF (pdfplumber.open)

A trimesh object loaded from a file is stored as that file; one made in memory is exported as
``Mesh.file_type`` (default ``glb``). Every mesh of a column is read with the column's file type, so
a later sample of another type is refused when written. Decoding can be turned off with
``decode=False`` (the stored bytes are returned).
"""

from __future__ import annotations

import io
import os
from dataclasses import dataclass
from typing import Any, cast

from ..._core._errors import FormatError
from .._serializer_base import Serializer, loaded_class
from ._base import MediaRef, has_media_extension, read_media_bytes, require

__all__ = ["Mesh", "MeshSerializer", "Pdf", "PdfSerializer"]

MESH_EXTENSIONS = ("glb", "ply", "stl")


@dataclass
class Mesh(MediaRef):
    """A 3D mesh (LitData's ``litdata.types.Mesh``).

    Args:
        path / bytes: A ``.glb``, ``.ply`` or ``.stl`` file, stored as is.
        mesh: A ``trimesh.Trimesh`` or ``trimesh.Scene``.
        file_type: The format to export ``mesh`` to (default ``"glb"``).
    """

    mesh: Any = None
    file_type: str = "glb"


@dataclass
class Pdf(MediaRef):
    """A PDF document (LitData's ``litdata.types.Pdf``).

    Args:
        path / bytes: A PDF file, stored as is.
        pdf: A ``pdfplumber.PDF``; its underlying file or stream is stored.
    """

    pdf: Any = None


def _trimesh_types() -> tuple[type, ...]:
    found = (loaded_class("trimesh", "Trimesh"), loaded_class("trimesh", "Scene"))
    return tuple(t for t in found if t is not None)


class MeshSerializer(Serializer):
    """``Mesh`` wrappers, trimesh objects and ``.glb``/``.ply``/``.stl`` path strings."""

    name = "mesh"

    def __init__(self, decode: bool = True, file_type: str = "glb") -> None:
        self.decode = decode
        self.file_type = file_type

    def can_serialize(self, obj: object) -> bool:
        kinds = _trimesh_types()
        if isinstance(obj, Mesh) or (kinds and isinstance(obj, kinds)):
            return True
        return has_media_extension(obj, MESH_EXTENSIONS)

    def serialize(self, obj: Any) -> tuple[bytes, str | None]:
        file_type = obj.file_type if isinstance(obj, Mesh) else "glb"
        native: Any = obj.mesh if isinstance(obj, Mesh) and obj.mesh is not None else obj
        kinds = _trimesh_types()
        if kinds and isinstance(native, kinds):
            metadata = getattr(native, "metadata", None)
            path = (metadata.get("file_path") or metadata.get("file_name")) if isinstance(metadata, dict) else None
            if path and os.path.isfile(path):
                data, ext = read_media_bytes(path)
                return data, f"mesh:{ext or 'glb'}"
            exported = cast("Any", native).export(file_type=file_type)
            return bytes(exported if isinstance(exported, (bytes, bytearray)) else str(exported).encode()), (
                f"mesh:{file_type}"
            )
        data, ext = read_media_bytes(obj)
        if ext not in MESH_EXTENSIONS:
            raise FormatError(f"a mesh path must end in .glb, .ply or .stl, got {ext!r}")
        return data, f"mesh:{ext}"

    def deserialize(self, data: bytes | memoryview) -> Any:
        raw = bytes(data)
        if not self.decode:
            return raw
        trimesh = require("trimesh", "mesh", "reading meshes")
        try:
            return trimesh.load(io.BytesIO(raw), file_type=self.file_type)
        except (ValueError, KeyError, IndexError, TypeError, OSError) as exc:
            raise FormatError(f"invalid {self.file_type} mesh payload ({len(raw)} bytes): {exc}") from exc

    def setup(self, data_format: str) -> Serializer:
        head, _, tail = data_format.partition(":")
        return MeshSerializer(self.decode, tail or "glb") if head == "mesh" else self


def _pdf_stream_bytes(pdf: Any) -> bytes:
    stream = getattr(pdf, "stream", None)
    name = getattr(stream, "name", None)
    if isinstance(name, str) and os.path.isfile(name):
        with open(name, "rb") as handle:
            return handle.read()
    if stream is None:
        raise FormatError("the pdfplumber PDF has no readable stream; pass Pdf(path=...) or Pdf(bytes=...)")
    stream.seek(0)
    return bytes(stream.read())


class PdfSerializer(Serializer):
    """``Pdf`` wrappers, ``pdfplumber.PDF`` objects and ``.pdf`` path strings (not bare ``bytes``)."""

    name = "pdf"

    def __init__(self, decode: bool = True) -> None:
        self.decode = decode

    def can_serialize(self, obj: object) -> bool:
        # LitData also claims bare bytes starting with b"%PDF"; litstream keeps bare bytes as ``bytes``
        # so that any byte string reads back as written (LitData reads such a leaf as bytes too).
        pdf_type = loaded_class("pdfplumber.pdf", "PDF")
        if isinstance(obj, Pdf) or (pdf_type is not None and isinstance(obj, pdf_type)):
            return True
        return has_media_extension(obj, ("pdf",))

    def serialize(self, obj: Any) -> tuple[bytes, str | None]:
        native = obj.pdf if isinstance(obj, Pdf) and obj.pdf is not None else obj
        pdf_type = loaded_class("pdfplumber.pdf", "PDF")
        if pdf_type is not None and isinstance(native, pdf_type):
            return _pdf_stream_bytes(native), "pdf"
        if isinstance(native, (bytes, bytearray)):
            return bytes(native), "pdf"
        data, _ = read_media_bytes(native)
        return data, "pdf"

    def deserialize(self, data: bytes | memoryview) -> Any:
        raw = bytes(data)
        if not self.decode:
            return raw
        pdfplumber = require("pdfplumber", "pdf", "reading PDF samples")
        try:
            return pdfplumber.open(io.BytesIO(raw))
        except Exception as exc:  # pdfminer raises many unrelated types for malformed files
            raise FormatError(f"invalid PDF payload ({len(raw)} bytes): {exc}") from exc
