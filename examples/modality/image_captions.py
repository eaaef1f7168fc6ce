"""Image + caption pairs: tiles of scikit-learn's two sample photos, each with a caption.

1. Cut the two real photos bundled with scikit-learn (``china.jpg``, ``flower.jpg``, 427x640) into
   64x64 tiles.
2. ``litstream.optimize`` writes ``{"image": Jpeg(array=tile), "caption": Text(text=...)}``: the tile
   is JPEG-encoded (quality capped at 95, LitData's ``Jpeg`` default) and the caption is stored as
   text, never mistaken for a file path, even when it looks like one.
3. Streaming gives ``uint8`` tensors ``(3, 64, 64)`` and ``str`` captions; the recipe checks every
   caption came back and that the decoded tiles are close to the originals (JPEG is lossy). Prints
   ``pairs: N`` and ``mean abs error: x.xx``; exits 1 when the error exceeds 8 grey levels.

Run: ``python examples/modality/image_captions.py [--data-dir D]``.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from _common import data_dir_from_args, fresh
from sklearn.datasets import load_sample_images

import litstream

TILE = 64


def tiles() -> list[tuple[str, int, int, np.ndarray]]:
    photos = load_sample_images()
    out = []
    for name, photo in zip(("china", "flower"), photos.images, strict=True):
        for r in range(0, photo.shape[0] - TILE + 1, TILE * 2):
            for c in range(0, photo.shape[1] - TILE + 1, TILE * 2):
                out.append((name, r, c, photo[r : r + TILE, c : c + TILE]))
    return out


def to_sample(index: int) -> dict[str, Any]:
    name, r, c, tile = tiles()[index]
    return {"image": litstream.Jpeg(array=tile), "caption": litstream.Text(text=f"{name}.jpg, rows {r}+, cols {c}+")}


def main(argv: list[str] | None = None) -> int:
    root = data_dir_from_args("image_captions", __doc__ or "", argv)
    out = fresh(root) / "optimized"
    expected = tiles()
    litstream.optimize(to_sample, list(range(len(expected))), out, chunk_bytes="1MB", num_workers=1, verbose=False)
    ds = litstream.StreamingDataset(out)
    errors, captions = [], set()
    for i in range(len(ds)):
        sample = ds[i]
        name, r, c, tile = expected[i]
        assert sample["caption"] == f"{name}.jpg, rows {r}+, cols {c}+", sample["caption"]
        captions.add(sample["caption"])
        decoded = sample["image"].permute(1, 2, 0).numpy()
        errors.append(np.abs(decoded.astype(np.int16) - tile.astype(np.int16)).mean())
    error = float(np.mean(errors))
    print(f"pairs: {len(captions)}")
    print(f"first caption: {ds[0]['caption']!r}, image {tuple(ds[0]['image'].shape)} {ds[0]['image'].dtype}")
    print(f"mean abs error: {error:.2f}")
    return 0 if len(captions) == len(expected) and error <= 8 else 1


if __name__ == "__main__":
    sys.exit(main())
