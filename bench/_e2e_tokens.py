"""The token dataset of the tokens benchmark, written by LitData's ``optimize`` with its ``TokensLoader``.

Document ``i`` is ``2000 + (i * 7919) % 4000`` int32 tokens; chunks hold 2048 * 1024 tokens. Both
libraries read these same files (LitData never writes into an uncompressed local dataset).
"""

from __future__ import annotations

import torch


def document(i: int) -> torch.Tensor:
    length = 2000 + (i * 7919) % 4000
    return (torch.arange(length, dtype=torch.int32) * 31 + i) % 50_000


def write(output_dir: str, documents: int) -> None:
    import litdata
    from litdata.streaming.item_loader import TokensLoader

    litdata.optimize(
        fn=document,
        inputs=list(range(documents)),
        output_dir=output_dir,
        chunk_size=2048 * 1024,
        item_loader=TokensLoader(),
        num_workers=1,
        start_method="fork",
        verbose=False,
    )
