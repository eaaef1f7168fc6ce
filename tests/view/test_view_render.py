"""How ``litstream view`` renders a decoded sample: each kind of leaf as what it is, every string escaped, every
size bounded, and a leaf that cannot be drawn named instead of failing the page."""

from __future__ import annotations

import base64
import io
import re
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from litstream._view._render import MAX_ITEMS, MAX_MEDIA_BYTES, MAX_TEXT, THUMBNAIL, media_budget, render_value
from litstream.format.media._audio import DecodedAudio, encode_wav


def _shown_images(text: str) -> list[Image.Image]:
    found = re.findall(r'src="data:image/(?:png|jpeg);base64,([A-Za-z0-9+/=]+)"', text)
    return [Image.open(io.BytesIO(base64.b64decode(data))) for data in found]


def _encoded(image: Image.Image, fmt: str) -> bytes:
    out = io.BytesIO()
    image.save(out, format=fmt)
    return out.getvalue()


@pytest.mark.parametrize(
    ("value", "size"),
    [
        (Image.new("RGB", (40, 30), "red"), (40, 30)),
        (Image.new("L", (2000, 500)), (THUMBNAIL, THUMBNAIL // 4)),  # shrunk to the thumbnail
        (Image.new("I;16", (20, 20)), (20, 20)),  # a mode PNG cannot hold is converted
        (torch.zeros((3, 24, 32), dtype=torch.uint8), (32, 24)),  # a decoded image tensor (C, H, W)
        (np.zeros((24, 32, 4), dtype=np.uint8), (32, 24)),  # (H, W, C)
        (np.zeros((16, 16), dtype=np.uint8), (16, 16)),  # grey
    ],
    ids=["pil", "pil-large", "pil-16bit", "tensor-chw", "array-hwc", "array-grey"],
)
def test_images_are_shown_as_pictures(value: Any, size: tuple[int, int]) -> None:
    assert [im.size for im in _shown_images(render_value(value))] == [size]


@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
def test_encoded_image_bytes_are_shown_as_they_are(fmt: str) -> None:
    data = _encoded(Image.new("RGB", (12, 9), "blue"), fmt)
    text = render_value(data)
    assert f"data:image/{fmt.lower()};base64,{base64.b64encode(data).decode()}" in text


def test_arrays_are_summarised_not_drawn() -> None:
    text = render_value(np.array([[1.5, -2.0], [3.0, 0.0]], dtype=np.float64))
    assert "shape (2, 2), dtype float64, min -2.0, max 3.0" in text
    assert "<img" not in text
    assert "shape (3, 4), dtype int64, min 0, max 11" in render_value(torch.arange(12).reshape(3, 4))
    assert "min" not in render_value(np.zeros((0, 3)))  # empty: nothing to take a minimum of
    assert "<img" not in render_value(np.zeros((3, 4, 5), dtype=np.uint8))  # not an image's shape


def test_audio_is_playable_and_bounded() -> None:
    wave = np.sin(np.linspace(0, 100, 8000, dtype=np.float32))[None, :] * 0.5
    text = render_value(DecodedAudio(wave, 8000))
    assert '<audio controls src="data:audio/wav;base64,' in text
    assert "1 channel(s), 8000 samples at 8000 Hz (1.00 s)" in text
    long = render_value(DecodedAudio(np.zeros((2, 48_000 * 60), dtype=np.float32), 48_000))
    data = base64.b64decode(re.findall(r"base64,([A-Za-z0-9+/=]+)", long)[0])
    assert len(data) <= MAX_MEDIA_BYTES + 44  # the WAV header
    assert "the first" in long
    assert "<audio" not in render_value(DecodedAudio(wave, 0))  # no sampling rate: summarised
    wav = encode_wav(wave[0], 8000)
    assert f"data:audio/wav;base64,{base64.b64encode(wav).decode()}" in render_value(wav)


def test_strings_are_escaped_and_cut() -> None:
    hostile = "<script>alert('x')</script>" + "y" * (2 * MAX_TEXT)
    text = render_value(hostile)
    assert "<script>" not in text
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in text
    assert f"{len(hostile) - MAX_TEXT} more characters" in text
    keyed = render_value({'"><img src=x onerror=alert(1)>': 1})
    assert "<img" not in keyed


def test_containers_are_bounded() -> None:
    text = render_value(list(range(MAX_ITEMS + 10)))
    assert text.count("<tr>") == MAX_ITEMS
    assert "10 more" in text
    deep: Any = 1
    for _ in range(10):
        deep = [deep]
    assert "nested too deep" in render_value(deep)


def test_large_media_bytes_are_summarised() -> None:
    data = b"\x89PNG\r\n\x1a\n" + bytes(MAX_MEDIA_BYTES)
    text = render_value(data)
    assert "too large to show" in text
    assert "base64" not in text


class _Hostile:
    def __repr__(self) -> str:
        raise RuntimeError("<b>repr fails</b>")


def test_a_leaf_that_cannot_be_drawn_is_named() -> None:
    text = render_value({"ok": 1, "bad": _Hostile(), "broken": DecodedAudio(np.zeros((1, 10)), 2**40)})
    assert "_Hostile could not be shown: &lt;b&gt;repr fails&lt;/b&gt;" in text
    assert "<code>1</code>" in text
    assert "<audio" not in text


def test_a_page_embeds_a_bounded_amount_of_media() -> None:
    image = _encoded(Image.new("RGB", (12, 9), "blue"), "PNG")
    with media_budget(3 * len(image)):
        text = render_value([image] * 5 + [Image.new("RGB", (8, 8))])
    assert len(_shown_images(text)) == 3  # the rest are named, not embedded
    assert text.count("media not shown") == 3
    assert len(_shown_images(render_value([image] * 5))) == 5  # outside a page: each leaf is bounded alone
