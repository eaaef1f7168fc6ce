"""Media payloads are untrusted: any bytes either decode or raise ``FormatError``, never a foreign error."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from litstream import FormatError
from litstream.format._serializers import default_serializers, serializer_for_format
from peer import require_dev

FORMATS = ["text", "image:png", "jpeg", "jpeg_array", "pil", "tifffile", "audio:wav", "nifti:nii", "mesh:glb", "graph"]
PREFIXES = {
    "image:png": b"\x89PNG\r\n\x1a\n",
    "jpeg": b"\xff\xd8\xff\xe0",
    "jpeg_array": struct.pack("<II", 1, 8),
    "tifffile": b"II*\x00",
    "audio:wav": b"RIFF\x24\x00\x00\x00WAVEfmt ",
    "nifti:nii": struct.pack("<i", 348),
    "mesh:glb": b"glTF\x02\x00\x00\x00",
    "graph": b"LDGR\x03",
}


@pytest.mark.parametrize("data_format", FORMATS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tail=st.binary(max_size=400), prefixed=st.booleans())
def test_garbage_payloads_raise_format_error(data_format: str, tail: bytes, prefixed: bool) -> None:
    for module in {"tifffile": "tifffile", "nifti:nii": "nibabel", "mesh:glb": "trimesh"}.get(data_format, "").split():
        require_dev(module)
    payload = (PREFIXES.get(data_format, b"") if prefixed else b"") + tail
    serializer = serializer_for_format(data_format, default_serializers())
    try:
        serializer.deserialize(memoryview(payload))
    except FormatError:
        pass
