"""Pre-train a tiny GPT on the Python standard library's own source, streamed with TokensLoader.

1. Corpus: the ``.py`` files of this interpreter's standard library
   (``sysconfig.get_paths()["stdlib"]``, ~1,800 files, ~30 MB; ``--max-files`` takes a subset).
2. Tokenize byte-level (token = byte value 0..255, 256 = end of file; ``uint16``) and write the token
   arrays with ``litstream.optimize(..., item_loader=TokensLoader())`` using several worker processes
   (``<data-dir>/tokens``, rebuilt only when the file selection changes).
3. Train ``model.TinyGPT`` on windows of ``seq_len + 1`` tokens streamed by
   ``StreamingDataLoader(StreamingDataset(..., item_loader=TokensLoader(seq_len + 1), shuffle=True))``,
   printing the loss; at step ``--save-at`` save model, optimizer and loader state to
   ``<data-dir>/checkpoint.pt`` (mid-epoch) and keep going until ``--steps``.
4. ``--resume`` loads that checkpoint and continues from the saved position: the same batches, in
   the same order, that the uninterrupted run trained on after the checkpoint.

Run: ``python examples/pretrain/train.py`` then ``python examples/pretrain/train.py --resume``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import sysconfig
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from model import GPTConfig, TinyGPT  # examples/pretrain/model.py (the script's directory is on sys.path)

import litstream

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["corpus_files", "main", "prepare_tokens", "tokenize_file", "train"]

DEFAULT_DATA_DIR = Path(__file__).resolve().parent / "data"
EOS = 256  # end-of-file token after each file's bytes
VOCAB_SIZE = 257
CHUNK_TOKENS = 1 << 20  # tokens per chunk file (2 MiB of uint16)
# Settings a resumed run must share with the run that saved the checkpoint.
RESUME_KEYS = ("max_files", "seq_len", "batch_size", "dim", "layers", "heads", "lr", "seed", "num_workers")


def corpus_files(max_files: int) -> list[Path]:
    """The standard library's ``.py`` files in sorted order (no ``site-packages``); the first
    ``max_files`` of them when ``max_files > 0``."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.rglob("*.py") if "site-packages" not in p.parts and p.is_file())
    return files[:max_files] if max_files > 0 else files


def tokenize_file(path: str) -> np.ndarray:
    """Byte-level tokens of one file: its bytes as ``uint16`` values, then ``EOS``."""
    data = np.frombuffer(Path(path).read_bytes(), dtype=np.uint8)
    tokens = np.empty(len(data) + 1, dtype=np.uint16)
    tokens[:-1] = data
    tokens[-1] = EOS
    return tokens


def prepare_tokens(data_dir: Path, max_files: int, workers: int) -> Path:
    """Write the corpus as a token dataset under ``data_dir/tokens`` unless the same one is there."""
    files = corpus_files(max_files)
    manifest = {"files": [str(p) for p in files], "sizes": [p.stat().st_size for p in files], "eos": EOS}
    digest = hashlib.sha256(json.dumps(manifest).encode()).hexdigest()
    out, stamp = data_dir / "tokens", data_dir / "tokens.sha256"
    if (out / "index.json").exists() and stamp.exists() and stamp.read_text() == digest:
        print(f"reusing {out} ({len(files)} files)", flush=True)
        return out
    start = time.perf_counter()
    litstream.optimize(
        tokenize_file,
        [str(p) for p in files],
        out,
        chunk_size=CHUNK_TOKENS,
        item_loader=litstream.TokensLoader(),
        num_workers=workers,
        mode="overwrite",
        verbose=False,
    )
    stamp.write_text(digest)
    index = json.loads((out / "index.json").read_text())
    tokens = sum(c["dim"] for c in index["chunks"])
    print(
        f"optimized {len(files)} files ({sum(manifest['sizes']) / 1e6:.1f} MB) into {tokens:,} tokens, "
        f"{len(index['chunks'])} chunks, in {time.perf_counter() - start:.1f}s",
        flush=True,
    )
    return out


def _batch_digest(batch: torch.Tensor) -> str:
    return hashlib.sha1(batch.numpy().tobytes()).hexdigest()[:16]


def _save(path: Path, payload: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    torch.save(payload, tmp)
    os.replace(tmp, path)  # a crash never leaves a half-written checkpoint


def train(args: argparse.Namespace, tokens_dir: Path) -> list[float]:
    """Train until ``args.steps`` (from the checkpoint's step with ``--resume``); return the losses."""
    torch.manual_seed(args.seed)
    model = TinyGPT(GPTConfig(VOCAB_SIZE, args.seq_len, args.dim, args.layers, args.heads))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    dataset = litstream.StreamingDataset(
        tokens_dir, item_loader=litstream.TokensLoader(block_size=args.seq_len + 1), shuffle=True, seed=args.seed
    )
    loader = litstream.StreamingDataLoader(dataset, batch_size=args.batch_size, num_workers=args.num_workers)
    checkpoint_path = args.data_dir / "checkpoint.pt"
    settings = {key: getattr(args, key) for key in RESUME_KEYS}
    step = 0
    if args.resume:
        if not checkpoint_path.exists():
            raise SystemExit(f"--resume: no checkpoint at {checkpoint_path}; run without --resume first")
        checkpoint = torch.load(checkpoint_path, weights_only=False)
        if checkpoint["settings"] != settings:
            raise SystemExit(f"--resume: the checkpoint was saved with {checkpoint['settings']}, not {settings}")
        model.load_state_dict(checkpoint["model"])
        optimizer.load_state_dict(checkpoint["optimizer"])
        loader.load_state_dict(checkpoint["loader"])
        step = checkpoint["step"]
        print(f"resumed from step {step} ({checkpoint_path})", flush=True)
    windows = len(dataset)
    print(
        f"{windows:,} windows of {args.seq_len + 1} tokens per epoch, batch {args.batch_size}, "
        f"model {sum(p.numel() for p in model.parameters()):,} parameters",
        flush=True,
    )
    trace = args.trace.open("a") if args.trace else None
    losses: list[float] = []
    start, model_time = time.perf_counter(), 0.0
    model.train()
    while step < args.steps:
        for batch in loader:
            step += 1
            tick = time.perf_counter()
            loss = model.loss(batch.long())
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            model_time += time.perf_counter() - tick
            losses.append(loss.item())
            if trace is not None:
                trace.write(json.dumps({"step": step, "loss": losses[-1], "batch": _batch_digest(batch)}) + "\n")
            if step % args.log_every == 0 or step in (1, args.steps):
                recent = losses[-args.log_every :]
                print(f"step {step}/{args.steps}: loss {sum(recent) / len(recent):.4f}", flush=True)
            if step == args.save_at and not args.resume:
                payload = {
                    "step": step,
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "loader": loader.state_dict(),
                    "settings": settings,
                }
                _save(checkpoint_path, payload)
                print(f"saved checkpoint at step {step} to {checkpoint_path}", flush=True)
            if step >= args.steps:
                break
    if trace is not None:
        trace.close()
    elapsed = time.perf_counter() - start
    print(f"trained {len(losses)} steps in {elapsed:.1f}s ({model_time:.1f}s in the model)", flush=True)
    return losses


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="tokens and checkpoint go here")
    parser.add_argument("--max-files", type=int, default=0, help="use the first N stdlib files (0: all)")
    parser.add_argument("--optimize-workers", type=int, default=2, help="optimize worker processes")
    parser.add_argument("--num-workers", type=int, default=2, help="DataLoader worker processes")
    parser.add_argument("--seq-len", type=int, default=128, help="context length in tokens")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=600, help="total training steps")
    parser.add_argument("--save-at", type=int, default=None, help="checkpoint step (default: steps // 2)")
    parser.add_argument("--log-every", type=int, default=50)
    parser.add_argument("--resume", action="store_true", help="continue from <data-dir>/checkpoint.pt")
    parser.add_argument("--trace", type=Path, default=None, help="append one JSON line per step (loss, batch hash)")
    args = parser.parse_args(argv)
    if args.save_at is None:
        args.save_at = args.steps // 2
    if not 0 < args.save_at <= args.steps:
        parser.error(f"--save-at must be in [1, --steps={args.steps}], got {args.save_at}")
    if args.log_every < 1:
        parser.error("--log-every must be >= 1")
    # One compute thread: the DataLoader workers and optimize use the other cores (on 2 cores, 2 threads
    # oversubscribe them and each step gets slower, not faster).
    torch.set_num_threads(1)
    args.data_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    tokens_dir = prepare_tokens(args.data_dir, args.max_files, args.optimize_workers)
    losses = train(args, tokens_dir)
    if not args.resume and len(losses) >= 20:
        head, tail = losses[:10], losses[-10:]
        print(f"loss {sum(head) / 10:.3f} (first 10 steps) -> {sum(tail) / 10:.3f} (last 10 steps)", flush=True)
    print(f"total time: {time.perf_counter() - start:.1f}s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
