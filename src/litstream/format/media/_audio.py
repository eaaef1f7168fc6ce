"""The ``Audio`` wrapper and the ``audio`` encoding.

Payload: the audio file's bytes; ``data_format`` is ``"audio:<ext>"`` (``"audio:wav"`` for
waveforms). A waveform (``Audio(array=..., sampling_rate=...)``) and a raw ``.pcm`` file (int16
little-endian samples, scaled by 1/32767) are encoded as 16-bit PCM WAV with the standard library's
``wave``: samples are clipped to [-1, 1], multiplied by 32767 and truncated to int16, channels
interleaved. That is what LitData 0.2.76 writes when torchcodec is not usable (torchcodec, when
present, makes LitData write a float WAV instead; both decode alike).

Decoding (``AudioSerializer(decode=...)``, LitData's argument):

* ``"decoder"`` (default): a :class:`DecodedAudio`, which answers ``audio["array"]`` (float32
  NumPy array, ``(samples,)`` for mono else ``(channels, samples)``) and ``audio["sampling_rate"]``
  like LitData's torchcodec decoder, and ``get_all_samples()`` (``.data`` a float32 tensor
  ``(channels, samples)``, ``.sample_rate``).
* ``"samples"``: ``(float32 tensor (channels, samples), sampling_rate)``.
* ``"bytes"``: the stored bytes.

Integer PCM is scaled by 1/2^(bits-1), as FFmpeg and libsndfile do. PCM WAV decodes with the
standard library alone; other formats (FLAC, OGG, MP3, float WAV, ...) need the ``audio`` extra
(``soundfile``). LitData decodes with torchcodec instead; ``Audio(array=...)`` of a decoded
torchcodec object is not recognised here.
"""

from __future__ import annotations

import io
import wave
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..._core._errors import FormatError
from .._serializer_base import Serializer
from ._base import MediaRef, has_media_extension, media_path_bytes, read_media_bytes, require, same_head

__all__ = ["Audio", "AudioSerializer", "DecodedAudio", "encode_wav"]

AUDIO_EXTENSIONS = ("wav", "mp3", "flac", "ogg", "opus", "m4a", "aac", "wma", "pcm")


@dataclass
class Audio(MediaRef):
    """An audio sample (LitData's ``litdata.types.Audio``).

    Args:
        path / bytes: An audio file (any extension of ``AUDIO_EXTENSIONS``), stored as is; a
            ``.pcm`` path is raw int16 and needs ``sampling_rate``.
        array: A waveform in [-1, 1], ``(samples,)`` or ``(channels, samples)``; needs ``sampling_rate``.
        sampling_rate: Samples per second (Hz).
        num_channels: Kept for LitData compatibility (torchcodec's encoder uses it; the WAV
            writer takes the channel count from ``array``).
        stream_index: Kept for LitData compatibility (torchcodec decoding).
    """

    array: Any = None
    sampling_rate: int | None = None
    num_channels: int | None = None
    stream_index: int | None = None


@dataclass(frozen=True)
class _Samples:
    data: Any
    sample_rate: int


class DecodedAudio:
    """A decoded audio leaf: ``audio["array"]``, ``audio["sampling_rate"]``, ``get_all_samples()``.

    Attributes:
        samples: float32 array ``(channels, samples)``.
        sampling_rate: Hz.
    """

    def __init__(self, samples: np.ndarray[Any, Any], sampling_rate: int) -> None:
        self.samples = samples
        self.sampling_rate = sampling_rate

    def __getitem__(self, key: str) -> Any:
        if key == "array":
            return self.samples[0] if self.samples.shape[0] == 1 else self.samples
        if key == "sampling_rate":
            return self.sampling_rate
        raise KeyError(key)

    def get_all_samples(self) -> _Samples:
        """All samples as ``.data`` (float32 ``torch.Tensor`` ``(channels, samples)``) and ``.sample_rate``."""
        import torch

        return _Samples(torch.from_numpy(self.samples.copy()), self.sampling_rate)

    def __repr__(self) -> str:
        channels, frames = self.samples.shape
        return f"DecodedAudio(channels={channels}, samples={frames}, sampling_rate={self.sampling_rate})"


def encode_wav(array: Any, sampling_rate: int) -> bytes:
    """A 16-bit PCM WAV of ``array`` (``(samples,)`` or ``(channels, samples)``, values in [-1, 1]).

    Raises:
        FormatError: the array has more than 2 dimensions or the rate is not positive.
    """
    detach = getattr(array, "detach", None)
    values = np.asarray(detach().cpu().numpy() if detach is not None else array, dtype=np.float32)
    if values.ndim == 1:
        values = values[None, :]
    if values.ndim != 2 or int(sampling_rate) <= 0:
        raise FormatError(
            f"Audio(array=...) must be (samples,) or (channels, samples) with a positive sampling_rate; "
            f"got shape {values.shape} at {sampling_rate} Hz"
        )
    pcm = (np.clip(values, -1.0, 1.0).T.reshape(-1) * 32767.0).astype("<i2")
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as handle:
        handle.setnchannels(int(values.shape[0]))
        handle.setsampwidth(2)
        handle.setframerate(int(sampling_rate))
        handle.writeframes(pcm.tobytes())
    return buffer.getvalue()


def _decode_pcm_wav(data: bytes) -> tuple[np.ndarray[Any, Any], int] | None:
    try:
        with wave.open(io.BytesIO(data), "rb") as handle:
            channels, width, rate = handle.getnchannels(), handle.getsampwidth(), handle.getframerate()
            frames = handle.readframes(handle.getnframes())
    except (wave.Error, EOFError):
        return None
    if width == 1:
        values = (np.frombuffer(frames, dtype=np.uint8).astype(np.float32) - 128.0) / 128.0
    elif width in (2, 4):
        values = np.frombuffer(frames, dtype=f"<i{width}").astype(np.float32) / float(2 ** (8 * width - 1))
    else:
        return None
    usable = len(values) - len(values) % channels
    return np.ascontiguousarray(values[:usable].reshape(-1, channels).T), rate


def _decode(data: bytes) -> tuple[np.ndarray[Any, Any], int]:
    decoded = _decode_pcm_wav(data) if data[:4] == b"RIFF" else None
    if decoded is not None:
        return decoded
    soundfile = require("soundfile", "audio", "decoding audio other than PCM WAV")
    try:
        frames, rate = soundfile.read(io.BytesIO(data), dtype="float32", always_2d=True)
    except (RuntimeError, TypeError, ValueError) as exc:  # soundfile.LibsndfileError is a RuntimeError
        raise FormatError(f"invalid audio payload ({len(data)} bytes): {exc}") from exc
    return np.ascontiguousarray(frames.T), int(rate)


class AudioSerializer(Serializer):
    """``Audio`` wrappers and audio path strings (``"audio:<ext>"``).

    Args:
        decode: ``"decoder"`` (default), ``"samples"`` or ``"bytes"`` (module docstring).
        sampling_rate: The rate of ``.pcm`` inputs without their own ``sampling_rate``.
        num_channels: Kept for LitData compatibility.
        stream_index: Kept for LitData compatibility.

    Raises:
        FormatError: ``decode`` is not one of the three names.
    """

    name = "audio"

    def __init__(
        self,
        decode: str = "decoder",
        sampling_rate: int | None = None,
        num_channels: int | None = None,
        stream_index: int | None = None,
    ) -> None:
        # Shaped like VideoSerializer.__init__ (check decode, keep the options), but the options differ.
        if decode not in {"decoder", "samples", "bytes"}:
            raise FormatError(f"AudioSerializer(decode={decode!r}): use 'decoder', 'samples' or 'bytes'")
        self.decode = decode
        self.sampling_rate = sampling_rate
        self.num_channels = num_channels
        self.stream_index = stream_index

    def can_serialize(self, obj: object) -> bool:
        return isinstance(obj, Audio) or has_media_extension(obj, AUDIO_EXTENSIONS)

    def serialize(self, obj: Any) -> tuple[bytes, str | None]:
        rate = obj.sampling_rate if isinstance(obj, Audio) else None
        if isinstance(obj, Audio) and obj.array is not None:
            if rate is None:
                raise FormatError("Audio(array=...) needs sampling_rate=, e.g. Audio(array=wave, sampling_rate=16000)")
            return encode_wav(obj.array, int(rate)), "audio:wav"
        path, payload = media_path_bytes(obj)
        if path and str(path).lower().endswith(".pcm"):
            rate = rate or self.sampling_rate
            if rate is None:
                raise FormatError("a .pcm file needs Audio(sampling_rate=...) or AudioSerializer(sampling_rate=...)")
            raw = payload if payload is not None else read_media_bytes(path)[0]
            samples = np.frombuffer(raw[: len(raw) - len(raw) % 2], dtype="<i2").astype(np.float32) / 32767.0
            return encode_wav(samples, int(rate)), "audio:wav"
        data, ext = read_media_bytes(obj)
        return data, f"audio:{ext or 'wav'}"

    def deserialize(self, data: bytes | memoryview) -> Any:
        raw = bytes(data)
        if self.decode == "bytes":
            return raw
        samples, rate = _decode(raw)
        if self.decode == "samples":
            import torch

            return torch.from_numpy(samples), rate
        return DecodedAudio(samples, rate)

    def same_format(self, recorded: str, fixed: str) -> bool:
        return same_head(recorded, fixed)
