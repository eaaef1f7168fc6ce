"""Train a small CNN on scikit-learn's handwritten digits, streamed through litstream.

1. Load the 1,797 real 8x8 digit scans bundled with scikit-learn (no download).
2. Split them 80/20, stratified, with a fixed seed.
3. Write each split as its own optimized dataset with :func:`litstream.optimize`
   (``<data-dir>/train`` and ``<data-dir>/test``).
4. Train a two-layer CNN by streaming the train split with ``StreamingDataLoader``; print the mean
   training loss per epoch.
5. Stream the held-out split, print ``held-out accuracy: 0.xxx``, and exit 1 when it is below 0.90.

Run: ``python examples/digits/train.py [--data-dir D] [--epochs N]``.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from torch import nn

import litstream

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["DigitsCNN", "evaluate", "main", "prepare_data", "to_sample", "train"]

DEFAULT_DATA_DIR = Path(__file__).resolve().parent / "data"
MIN_ACCURACY = 0.90
SPLIT_SEED = 0
TORCH_SEED = 0
CHUNK_SIZE = 128
OPTIMIZE_WORKERS = 2
LOADER_WORKERS = 2
TRAIN_BATCH_SIZE = 64
TEST_BATCH_SIZE = 256
LEARNING_RATE = 3e-3


def to_sample(images: np.ndarray, labels: np.ndarray, index: int) -> dict[str, Any]:
    """One sample: the ``index``-th image as float32 ``(1, 8, 8)`` in ``[0, 1]``, and its int label."""
    image = (images[index] / 16.0).astype(np.float32).reshape(1, 8, 8)
    return {"image": image, "label": int(labels[index])}


def prepare_data(data_dir: Path) -> tuple[Path, Path, int, int]:
    """Split the digits 80/20 (stratified) and optimize each split under ``data_dir``.

    Returns:
        ``(train_dir, test_dir, train_size, test_size)``. Existing datasets there are overwritten.
    """
    digits = load_digits()
    # load_digits' pixel values are integer counts in 0..16.
    x_train, x_test, y_train, y_test = train_test_split(
        digits.images, digits.target, test_size=0.2, stratify=digits.target, random_state=SPLIT_SEED
    )
    train_dir, test_dir = data_dir / "train", data_dir / "test"
    for out_dir, images, labels in ((train_dir, x_train, y_train), (test_dir, x_test, y_test)):
        litstream.optimize(
            functools.partial(to_sample, images, labels),
            list(range(len(labels))),
            out_dir,
            chunk_size=CHUNK_SIZE,
            num_workers=OPTIMIZE_WORKERS,
            mode="overwrite",
            verbose=False,
        )
    return train_dir, test_dir, len(y_train), len(y_test)


class DigitsCNN(nn.Module):
    """Two 3x3 conv layers (8x8 → 4x4 → 2x2 after pooling) and a linear classifier over 10 digits."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, kernel_size=3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.classifier = nn.Linear(32 * 2 * 2, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.classifier(self.features(x).flatten(1))
        return logits


def train(model: nn.Module, train_dir: Path, epochs: int) -> list[float]:
    """Train ``model`` on the streamed train split; print and return the mean loss per epoch."""
    loader = litstream.StreamingDataLoader(
        litstream.StreamingDataset(train_dir),
        batch_size=TRAIN_BATCH_SIZE,
        shuffle=True,
        num_workers=LOADER_WORKERS,
    )
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    loss_fn = nn.CrossEntropyLoss()
    losses: list[float] = []
    model.train()
    for epoch in range(1, epochs + 1):
        total, count = 0.0, 0
        for batch in loader:
            images, labels = batch["image"], batch["label"]
            optimizer.zero_grad()
            loss = loss_fn(model(images), labels)
            loss.backward()
            optimizer.step()
            total += loss.item() * len(labels)
            count += len(labels)
        losses.append(total / count)
        print(f"epoch {epoch}/{epochs}: train loss {losses[-1]:.4f} ({count} samples)", flush=True)
    return losses


@torch.no_grad()
def evaluate(model: nn.Module, test_dir: Path) -> float:
    """Accuracy of ``model`` on the streamed held-out split, in ``[0, 1]``."""
    loader = litstream.StreamingDataLoader(litstream.StreamingDataset(test_dir), batch_size=TEST_BATCH_SIZE)
    model.eval()
    correct, count = 0, 0
    for batch in loader:
        predictions = model(batch["image"]).argmax(dim=1)
        correct += int((predictions == batch["label"]).sum())
        count += len(batch["label"])
    return correct / count


def main(argv: Sequence[str] | None = None) -> int:
    """Run the whole job; return the exit status (0 when accuracy >= 0.90, else 1)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="where the datasets go")
    parser.add_argument("--epochs", type=int, default=8, help="training epochs (default 8)")
    args = parser.parse_args(argv)
    if args.epochs < 1:
        parser.error("--epochs must be >= 1")

    torch.manual_seed(TORCH_SEED)
    torch.set_num_threads(1)
    start = time.perf_counter()
    train_dir, test_dir, n_train, n_test = prepare_data(args.data_dir)
    print(f"optimized {n_train} train / {n_test} held-out samples into {args.data_dir}", flush=True)

    model = DigitsCNN()
    train(model, train_dir, args.epochs)
    accuracy = evaluate(model, test_dir)
    print(f"held-out accuracy: {accuracy:.3f}", flush=True)
    print(f"total time: {time.perf_counter() - start:.1f}s", flush=True)
    if accuracy < MIN_ACCURACY:
        print(f"accuracy below {MIN_ACCURACY:.2f}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
