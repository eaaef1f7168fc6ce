"""Audio: labelled tones stored as WAV and streamed back as waveforms.

The clips are SYNTHETIC: 0.25 s sine tones at 16 kHz, one per musical note from A3 to A5, generated
with NumPy (no audio data set ships with the packages this project uses).

1. ``litstream.optimize`` writes ``{"audio": Audio(array=wave, sampling_rate=16000), "note": str,
   "hz": float}``; the waveform is stored as a 16-bit PCM WAV file (``data_format`` ``"audio:wav"``),
   exactly as LitData writes it.
2. Streaming decodes each clip (``sample["audio"]["array"]``, ``["sampling_rate"]``, as LitData's
   decoder answers); the recipe finds each clip's strongest frequency with an FFT and checks it is
   the labelled one. Prints ``notes recovered: k/n`` and exits 1 unless all are.

Run: ``python examples/modality/audio_tones.py [--data-dir D]``.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from _common import data_dir_from_args, fresh

import litstream

RATE, SECONDS = 16_000, 0.25
NOTES = ["A3", "A#3", "B3", "C4", "C#4", "D4", "D#4", "E4", "F4", "F#4", "G4", "G#4", "A4"]


def tone(k: int) -> tuple[str, float, np.ndarray]:
    hz = 220.0 * 2 ** (k / 12)
    t = np.arange(int(RATE * SECONDS)) / RATE
    return NOTES[k], hz, (0.6 * np.sin(2 * np.pi * hz * t)).astype(np.float32)


def to_sample(k: int) -> dict[str, Any]:
    note, hz, wave = tone(k)
    return {"audio": litstream.Audio(array=wave, sampling_rate=RATE), "note": note, "hz": hz}


def main(argv: list[str] | None = None) -> int:
    root = data_dir_from_args("audio_tones", __doc__ or "", argv)
    out = fresh(root) / "optimized"
    litstream.optimize(to_sample, list(range(len(NOTES))), out, chunk_bytes="1MB", num_workers=1, verbose=False)
    recovered = 0
    for sample in litstream.StreamingDataset(out):
        samples, rate = sample["audio"]["array"], sample["audio"]["sampling_rate"]
        spectrum = np.abs(np.fft.rfft(samples * np.hanning(len(samples))))
        peak = float(np.fft.rfftfreq(len(samples), 1 / rate)[spectrum.argmax()])
        ok = abs(peak - sample["hz"]) <= rate / len(samples)  # within one FFT bin
        recovered += ok
        print(
            f"{sample['note']:>3}: labelled {sample['hz']:7.2f} Hz, strongest {peak:7.2f} Hz {'ok' if ok else 'WRONG'}"
        )
    print(f"notes recovered: {recovered}/{len(NOTES)}")
    return 0 if recovered == len(NOTES) else 1


if __name__ == "__main__":
    sys.exit(main())
