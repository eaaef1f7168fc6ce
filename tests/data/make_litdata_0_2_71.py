"""Write the LitData 0.2.71 fixtures under ``tests/data/litdata-0.2.71/`` (committed; run only to rebuild them).

Needs LitData 0.2.71 itself, e.g. installed to a side directory::

    python -m pip install --no-deps --target /tmp/ld071 litdata==0.2.71
    PYTHONPATH=/tmp/ld071 python tests/data/make_litdata_0_2_71.py

The sample functions are imported by ``tests/format/test_litdata_0_2_71.py``, which computes the
expected values from them; keep the two in step.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

HERE = Path(__file__).parent / "litdata-0.2.71"
NUM = 9


def pytree_sample(i: int) -> dict[str, Any]:
    """Every plain leaf kind: int, float, bool, str, bytes, NumPy 1-D and 2-D, tensors, a nested list."""
    return {
        "i": i,
        "f": i / 4 - 1.0,
        "b": i % 2 == 0,
        "s": f"sample-{i}-é",
        "raw": bytes(range(i, i + 5)),
        "np1": np.arange(i, i + 4, dtype=np.int32),
        "np2": np.full((2, 3), i, dtype=np.float32),
        "t1": torch.arange(3, dtype=torch.int64) * i,
        "t2": torch.ones((2, 2), dtype=torch.float16) * i,
        "nested": [i, str(i), [i * 2]],
    }


def token_sample(i: int) -> np.ndarray:
    """A 1-D int32 token array of ``3 + i % 4`` tokens counting up from ``100 * i``."""
    return np.arange(100 * i, 100 * i + 3 + i % 4, dtype=np.int32)


def main() -> None:
    import litdata

    if litdata.__version__ != "0.2.71":
        sys.exit(f"needs LitData 0.2.71, found {litdata.__version__}")
    shutil.rmtree(HERE, ignore_errors=True)
    common: dict[str, Any] = {"inputs": list(range(NUM)), "num_workers": 1, "verbose": False}
    litdata.optimize(fn=pytree_sample, output_dir=str(HERE / "pytree"), chunk_size=4, **common)
    litdata.optimize(fn=pytree_sample, output_dir=str(HERE / "pytree-zstd"), chunk_size=4, compression="zstd", **common)
    litdata.optimize(
        fn=token_sample, output_dir=str(HERE / "tokens"), chunk_size=12, item_loader=litdata.TokensLoader(), **common
    )
    for index in HERE.glob("*/index.json"):  # stable bytes across rebuilds
        data = json.loads(index.read_text())
        data["updated_at"] = "0"
        index.write_text(json.dumps(data, sort_keys=True))


if __name__ == "__main__":
    main()
