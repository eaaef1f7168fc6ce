"""The ``Nifti`` wrapper and the ``nifti`` encoding (medical volumes; the ``nifti`` extra: ``nibabel``).

Payload: a NIfTI-1 file, plain or gzip-compressed; ``data_format`` is ``"nifti:nii"`` or
``"nifti:nii.gz"`` (LitData 0.2.76). Decodes to a ``nibabel.Nifti1Image`` (gzip detected from the
payload's magic bytes). A nibabel image loaded from a file is stored as that file's bytes; one made
in memory as ``image.to_bytes()``; ``Nifti(array=..., affine=...)`` as a new ``Nifti1Image``
(identity affine by default).
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._core._errors import FormatError
from .._serializer_base import Serializer, loaded_class
from ._base import MediaRef, read_media_bytes, require, same_head

__all__ = ["Nifti", "NiftiSerializer"]


@dataclass
class Nifti(MediaRef):
    """A NIfTI volume (LitData's ``litdata.types.Nifti``); streams back as ``nibabel.Nifti1Image``.

    Args:
        path / bytes: A ``.nii`` or ``.nii.gz`` file, stored as is.
        image: A nibabel image.
        array: Voxels, stored with ``affine`` (a 4x4 matrix; default identity).
        affine: See ``array``.
    """

    image: Any = None
    array: Any = None
    affine: Any = None


def _is_nifti_path(value: object) -> bool:
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        return False
    lower = value.lower().split("?", 1)[0]
    return lower.endswith((".nii", ".nii.gz")) and os.path.isfile(value)


def _image_bytes(image: Any) -> tuple[bytes, str]:
    holder = getattr(image, "file_map", {}).get("image")
    filename = getattr(holder, "filename", None)
    if filename and os.path.isfile(filename):
        with open(filename, "rb") as handle:
            return handle.read(), ("nifti:nii.gz" if str(filename).lower().endswith(".nii.gz") else "nifti:nii")
    return bytes(image.to_bytes()), "nifti:nii"


class NiftiSerializer(Serializer):
    """``Nifti`` wrappers, nibabel images and ``.nii``/``.nii.gz`` path strings.

    Args:
        decode: ``True`` (default) decodes with nibabel; ``False`` returns the stored bytes.
    """

    name = "nifti"

    def __init__(self, decode: bool = True) -> None:
        self.decode = decode

    def can_serialize(self, obj: object) -> bool:
        spatial = loaded_class("nibabel.spatialimages", "SpatialImage")
        return isinstance(obj, Nifti) or (spatial is not None and isinstance(obj, spatial)) or _is_nifti_path(obj)

    def serialize(self, obj: Any) -> tuple[bytes, str | None]:
        if isinstance(obj, Nifti):
            if obj.image is not None:
                return _image_bytes(obj.image)
            if obj.array is not None:
                nib = require("nibabel", "nifti", "Nifti(array=...)")
                affine = obj.affine if obj.affine is not None else np.eye(4)
                return bytes(nib.Nifti1Image(np.asarray(obj.array), affine).to_bytes()), "nifti:nii"
            data, ext = read_media_bytes(obj)
            return data, f"nifti:{ext or 'nii'}"
        if not isinstance(obj, str):
            return _image_bytes(obj)
        data, _ = read_media_bytes(obj)
        return data, ("nifti:nii.gz" if obj.lower().endswith(".nii.gz") else "nifti:nii")

    def deserialize(self, data: bytes | memoryview) -> Any:
        raw = bytes(data)
        if not self.decode:
            return raw
        nib = require("nibabel", "nifti", "reading NIfTI samples")
        try:
            payload = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
            return nib.Nifti1Image.from_bytes(payload)
        except Exception as exc:  # nibabel raises many unrelated types (WrapStructError, ...) on bad files
            raise FormatError(f"invalid NIfTI payload ({len(raw)} bytes): {exc}") from exc

    def same_format(self, recorded: str, fixed: str) -> bool:
        return same_head(recorded, fixed)
