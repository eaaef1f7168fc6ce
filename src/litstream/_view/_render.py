"""A decoded sample as bounded, escaped HTML: images as ``<img>``, audio as ``<audio>``, text as text, arrays
summarised (shape, dtype, min/max), containers as nested tables.

A sample is a stranger's data: every string is HTML-escaped, every list, mapping, text and media payload is cut
to a fixed size before it is rendered, and media go into ``data:`` URLs of the few kinds sniffed here (PNG,
JPEG, GIF, WebP; WAV, FLAC, OGG, MP3), never anything the browser would run.
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import html
import io
import math
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["MAX_ITEMS", "MAX_MEDIA_BYTES", "MAX_PAGE_MEDIA_BYTES", "MAX_TEXT", "media_budget", "render_value"]

MAX_TEXT = 2000
"""Characters of a string shown (the rest is counted)."""
MAX_ITEMS = 32
"""Entries of a list or mapping shown."""
MAX_DEPTH = 4
"""Nesting levels rendered; deeper values are named only."""
MAX_MEDIA_BYTES = 2 * 2**20
"""Bytes of one image or audio payload put into a page; larger ones are summarised."""
MAX_PAGE_MEDIA_BYTES = 16 * 2**20
"""Bytes of images and audio one page embeds at most (see :func:`media_budget`); later media are summarised."""
THUMBNAIL = 256
"""Pixels of the longer side of a decoded image as shown."""
MAX_AUDIO_SECONDS = 30
"""Seconds of a decoded waveform turned into a playable WAV."""

_IMAGES = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF8", "image/gif"))
_AUDIO = ((b"fLaC", "audio/flac"), (b"OggS", "audio/ogg"), (b"ID3", "audio/mpeg"))


_BUDGET: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("litstream_view_budget", default=None)


@contextlib.contextmanager
def media_budget(limit: int = MAX_PAGE_MEDIA_BYTES) -> Iterator[None]:
    """Within this block, :func:`render_value` embeds at most ``limit`` bytes of media in all (one page's)."""
    token = _BUDGET.set([limit])
    try:
        yield
    finally:
        _BUDGET.reset(token)


def _spent() -> bool:
    left = _BUDGET.get()
    return left is not None and left[0] <= 0


_SPENT = '<span class="note">media not shown: this page embeds enough already; open the sample alone</span>'


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def sniff(data: bytes) -> tuple[str, str] | None:
    """``("img" | "audio", MIME type)`` of encoded media bytes, or ``None``."""
    head = data[:16]
    for magic, mime in _IMAGES:
        if head.startswith(magic):
            return "img", mime
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "img", "image/webp"
    if head[:4] == b"RIFF" and head[8:12] == b"WAVE":
        return "audio", "audio/wav"
    for magic, mime in _AUDIO:
        if head.startswith(magic):
            return "audio", mime
    if len(head) >= 2 and head[0] == 0xFF and head[1] in (0xFB, 0xF3, 0xF2):
        return "audio", "audio/mpeg"
    return None


def _media(kind: str, mime: str, data: bytes, note: str) -> str:
    left = _BUDGET.get()
    if left is not None:
        if left[0] < len(data):
            left[0] = 0
            return _SPENT + f'<div class="note">{_esc(note)}</div>'
        left[0] -= len(data)
    url = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
    tag = f'<img class="sample" alt="image" src="{url}">' if kind == "img" else f'<audio controls src="{url}"></audio>'
    return f'{tag}<div class="note">{_esc(note)}</div>'


def _bytes(data: bytes) -> str:
    found = sniff(data)
    if found is not None:
        kind, mime = found
        if len(data) <= MAX_MEDIA_BYTES:
            return _media(kind, mime, data, f"{mime}, {len(data)} bytes")
        return f'<span class="note">{_esc(mime)}, {len(data)} bytes (too large to show)</span>'
    return f"<code>{len(data)} bytes: {_esc(data[:32].hex(' '))}{' ...' if len(data) > 32 else ''}</code>"


def _text(text: str) -> str:
    shown = _esc(text[:MAX_TEXT])
    more = f'<div class="note">... {len(text) - MAX_TEXT} more characters</div>' if len(text) > MAX_TEXT else ""
    return f'<pre class="text">{shown}</pre>{more}'


def _png(image: Any) -> bytes:
    """A PIL image as a PNG of at most :data:`THUMBNAIL` pixels a side."""
    from PIL import ImageOps

    small = ImageOps.contain(image, (THUMBNAIL, THUMBNAIL)) if max(image.size) > THUMBNAIL else image.copy()
    if small.mode not in ("1", "L", "LA", "P", "RGB", "RGBA"):
        small = small.convert("RGB")
    out = io.BytesIO()
    small.save(out, format="PNG")
    return out.getvalue()


def _image_array(array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any] | None:
    """``array`` as an ``(H, W)`` or ``(H, W, C)`` uint8 image if it looks like one (a decoded image tensor)."""
    if array.dtype != np.uint8 or array.ndim not in (2, 3) or min(array.shape[-2:]) < 1:
        return None
    if array.ndim == 2:
        return array if min(array.shape) >= 8 else None
    if array.shape[0] in (1, 3, 4) and array.shape[2] not in (1, 3, 4):
        array = np.moveaxis(array, 0, -1)  # (C, H, W), as litstream decodes image:* and jpeg leaves
    if array.shape[2] not in (1, 3, 4) or min(array.shape[:2]) < 8:
        return None
    return array[:, :, 0] if array.shape[2] == 1 else array


def _array(value: Any) -> str:
    array = value.detach().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)
    parts = [f"{type(value).__module__.split('.')[0]} array", f"shape {tuple(array.shape)}", f"dtype {array.dtype}"]
    if array.size and (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_):
        low, high = array.min(), array.max()
        parts += [f"min {low}", f"max {high}"]
    summary = f"<code>{_esc(', '.join(parts))}</code>"
    image = _image_array(array)
    if image is None or _spent():
        return summary
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - pillow is a dev dependency
        return summary
    return _media("img", "image/png", _png(Image.fromarray(np.ascontiguousarray(image))), "") + summary


def _audio(samples: np.ndarray[Any, Any], rate: int) -> str:
    from ..format.media._audio import encode_wav

    if samples.ndim != 2:
        return f"<code>audio of shape {_esc(str(samples.shape))}</code>"
    channels, frames = samples.shape
    summary = f"audio: {channels} channel(s), {frames} samples at {rate} Hz ({frames / max(rate, 1):.2f} s)"
    if not 0 < rate < 2**31 or frames == 0 or channels == 0 or _spent():
        return f"<code>{_esc(summary)}</code>"
    kept = min(frames, MAX_AUDIO_SECONDS * rate, MAX_MEDIA_BYTES // (2 * channels))  # 16-bit WAV frames
    shown = samples[:, :kept]
    data = encode_wav(shown[0] if channels == 1 else shown, rate)
    if kept < frames:
        summary += f"; the first {kept / rate:.2f} s play here"
    return _media("audio", "audio/wav", data, summary)


def _number(value: Any) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return f"<code>{_esc(repr(value))}</code>"
    return f"<code>{_esc(str(value))}</code>"


def render_value(value: Any, depth: int = 0) -> str:
    """See :func:`_render`; a leaf that cannot be drawn (a malformed image or waveform) is named instead."""
    try:
        return _render(value, depth)
    except Exception as exc:  # a stranger's value: whatever a converter raises, the page still shows
        return f'<span class="error">{_esc(type(value).__name__)} could not be shown: {_esc(str(exc)[:300])}</span>'


def _render(value: Any, depth: int = 0) -> str:
    """``value`` (a decoded sample or a part of one) as an HTML fragment of bounded size.

    Args:
        value: Anything a decoder returns: ``str``, ``bytes``, numbers, NumPy arrays, tensors, PIL images,
            decoded audio, and dicts, lists and tuples of those.
        depth: Nesting level (containers deeper than :data:`MAX_DEPTH` are named, not rendered).

    Returns:
        HTML in which every string from ``value`` is escaped.
    """
    from ..format.media._audio import DecodedAudio

    if value is None or isinstance(value, (bool, int, float, np.number, np.bool_)):
        return _number(value)
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _bytes(bytes(value))
    if isinstance(value, DecodedAudio):
        return _audio(np.asarray(value.samples), int(value.sampling_rate))
    if isinstance(value, np.ndarray) or type(value).__name__ == "Tensor":
        return _array(value)
    if type(value).__module__.startswith("PIL.") and hasattr(value, "thumbnail"):
        width, height = value.size
        note = f"image {width}x{height} {value.mode}"
        if _spent():
            return f'{_SPENT}<div class="note">{_esc(note)}</div>'
        return _media("img", "image/png", _png(value), note)
    if isinstance(value, (dict, list, tuple)):
        if depth >= MAX_DEPTH:
            return f'<span class="note">{_esc(type(value).__name__)} of {len(value)} (nested too deep)</span>'
        pairs = list(value.items()) if isinstance(value, dict) else list(enumerate(value))
        rows = "".join(
            f"<tr><th>{_esc(str(k)[:200])}</th><td>{render_value(v, depth + 1)}</td></tr>" for k, v in pairs[:MAX_ITEMS]
        )
        more = f'<div class="note">... {len(pairs) - MAX_ITEMS} more</div>' if len(pairs) > MAX_ITEMS else ""
        return f'<table class="value">{rows}</table>{more}'
    return f"<code>{_esc(type(value).__name__)}: {_esc(repr(value)[:200])}</code>"
