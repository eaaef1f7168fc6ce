"""A PyTorch Lightning training run over a litstream loader, for ``tests/test_lightning.py``.

Usage: ``python lightning_run.py MODE DATA LOG CKPT --workers N [--combined] [--stop-at STEP] [--resume]``.

* ``MODE`` ``trainer``: ``Trainer(max_epochs=2).fit`` over a ``StreamingDataLoader`` (shuffled); with
  ``--stop-at S`` a callback saves a checkpoint with ``trainer.save_checkpoint`` after step ``S`` and the
  process dies (``os._exit``), as a crash would; with ``--resume`` the run starts with
  ``fit(ckpt_path=CKPT)`` in a new process. ``--ddp`` runs two CPU processes (gloo) under Lightning's own
  launcher.
* ``MODE`` ``fabric``: the same loop written with Fabric; the loader's state is saved with
  ``fabric.save(CKPT, {"model", "optimizer", "loader"})`` and restored with ``fabric.load``.

Each training step appends ``{"rank", "epoch", "ids"}`` (the sample ids of its batch) to ``LOG``.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import torch

import litstream as ls


def make_loader(data: str, workers: int, combined: bool) -> ls.StreamingDataLoader:
    if combined:
        dataset: Any = ls.CombinedStreamingDataset(
            [ls.StreamingDataset(f"{data}/a", shuffle=True), ls.StreamingDataset(f"{data}/b", shuffle=True)],
            seed=5,
            iterate_over_all=True,
        )
    else:
        dataset = ls.StreamingDataset(f"{data}/a", shuffle=True, seed=11)
    return ls.StreamingDataLoader(dataset, batch_size=8, num_workers=workers)


def log_batch(log: str, rank: int, epoch: int, batch: dict[str, Any]) -> None:
    with open(log, "a") as out:
        out.write(json.dumps({"rank": rank, "epoch": epoch, "ids": batch["id"].tolist()}) + "\n")


def run_trainer(args: argparse.Namespace) -> None:
    import pytorch_lightning as pl

    class Model(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(1, 1)

        def training_step(self, batch: dict[str, Any], batch_idx: int) -> torch.Tensor:
            log_batch(args.log, self.global_rank, self.current_epoch, batch)
            out: torch.Tensor = self.layer(batch["x"].float().unsqueeze(1)).sum()
            return out

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    class CrashAfter(pl.Callback):
        """Lightning saves a checkpoint after step ``steps``; then the process dies."""

        def on_train_batch_end(self, trainer: pl.Trainer, *_: Any) -> None:
            if trainer.global_step == args.stop_at:
                trainer.save_checkpoint(args.ckpt)
                trainer.strategy.barrier()
                os._exit(3)

    trainer = pl.Trainer(
        max_epochs=2,
        accelerator="cpu",
        devices=2 if args.ddp else 1,
        strategy="ddp" if args.ddp else "auto",
        callbacks=[CrashAfter()] if args.stop_at is not None else [],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    loader = make_loader(args.data, args.workers, args.combined)
    trainer.fit(Model(), train_dataloaders=loader, ckpt_path=args.ckpt if args.resume else None)


def run_fabric(args: argparse.Namespace) -> None:
    from lightning_fabric import Fabric

    fabric = Fabric(accelerator="cpu", devices=1)
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    model, optimizer = fabric.setup(model, optimizer)
    loader = make_loader(args.data, args.workers, args.combined)
    state: dict[str, Any] = {"model": model, "optimizer": optimizer, "loader": loader, "epoch": 0, "step": 0}
    if args.resume:
        fabric.load(args.ckpt, state)
    for epoch in range(state["epoch"], 2):
        for batch in loader:
            log_batch(args.log, 0, epoch, batch)
            loss = model(batch["x"].float().unsqueeze(1)).sum()
            fabric.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            state["step"] += 1
            if state["step"] == args.stop_at:
                state["epoch"] = epoch
                fabric.save(args.ckpt, state)
                os._exit(3)
        state["epoch"] = epoch + 1


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["trainer", "fabric"])
    parser.add_argument("data")
    parser.add_argument("log")
    parser.add_argument("ckpt")
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--combined", action="store_true")
    parser.add_argument("--stop-at", type=int, default=None)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--ddp", action="store_true")
    args = parser.parse_args()
    (run_trainer if args.mode == "trainer" else run_fabric)(args)


if __name__ == "__main__":
    main()
