"""Reading image samples without Pillow names the extra to install, instead of a bare ModuleNotFoundError."""

from __future__ import annotations

import struct
import sys

import pytest

from litstream import ConfigurationError
from litstream.format.mds._encodings import _image, _pil
from litstream.format.media._image_serializers import PilSerializer

# A 1x1 "L" image as the 'pil' serializer stores it: width, height, mode length, mode, pixels.
_PIL_PAYLOAD = struct.pack("<3I", 1, 1, 1) + b"L" + b"\x07"


def _without_pillow(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PIL", "PIL.Image"):
        monkeypatch.setitem(sys.modules, name, None)  # the package is absent: importing it fails


def test_pil_payload_decodes_with_pillow() -> None:
    image = PilSerializer().deserialize(_PIL_PAYLOAD)
    assert (image.mode, image.size, image.getpixel((0, 0))) == ("L", (1, 1), 7)
    mds_image = _pil(_PIL_PAYLOAD)
    assert (mds_image.mode, mds_image.size, mds_image.getpixel((0, 0))) == ("L", (1, 1), 7)


def test_pil_samples_without_pillow_name_the_image_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    _without_pillow(monkeypatch)
    with pytest.raises(
        ModuleNotFoundError, match=r"reading 'pil' samples needs the optional package 'PIL'.*litstream\[image\]"
    ):
        PilSerializer().deserialize(_PIL_PAYLOAD)


@pytest.mark.parametrize("decode", [_pil, _image])
def test_mds_image_columns_without_pillow_name_the_image_extra(monkeypatch: pytest.MonkeyPatch, decode: object) -> None:
    _without_pillow(monkeypatch)
    with pytest.raises(ConfigurationError, match=r"MDS image columns need Pillow: pip install \"litstream\[image\]\""):
        decode(_PIL_PAYLOAD)  # type: ignore[operator]
