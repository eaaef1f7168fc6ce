"""The modality recipes (``examples/modality/*.py``) run end to end and print what they checked."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from peer import require_dev

__all__: list[str] = []

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "examples" / "modality"


def _digits_1nn_accuracy() -> str:
    """What the image_folder recipe must print: 1-NN on scikit-learn's own arrays, same split."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    x, y = (digits.images[:600] * 255 / 16).astype(np.uint8).reshape(600, 64).astype(float), digits.target[:600]
    nearest = ((x[500:, None] - x[None, :500]) ** 2).sum(-1).argmin(1)
    return f"accuracy: {(y[:500][nearest] == y[500:]).mean():.3f}"


def _stdlib_sources() -> int:
    import email
    import json as json_module
    import urllib

    return sum(len(list(Path(m.__file__ or "").parent.glob("*.py"))) for m in (json_module, email, urllib))


# recipe -> (lines its output must contain, data_format of the written dataset)
EXPECTED = {
    "image_folder": (
        ["listed 600 images in 10 class folders", _digits_1nn_accuracy(), "identical to the source scans: True"],
        ["image:png", "int"],
    ),
    "image_captions": (["pairs: 30", "first caption: 'china.jpg, rows 0+, cols 0+'"], ["jpeg", "text"]),
    "audio_tones": (["notes recovered: 13/13", " A4: labelled  440.00 Hz"], ["audio:wav", "str", "float"]),
    "nifti_volumes": (["volumes matching: 4/4", "anatomical.nii: shape (33, 41, 25)"], ["nifti:nii", "str"]),
    "text_files": ([f"files matching: {_stdlib_sources()}/{_stdlib_sources()}"], ["text", "file:py", "str", "str"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("recipe", sorted(EXPECTED))
def test_modality_recipe_runs(recipe: str, tmp_path: Path) -> None:
    if recipe == "nifti_volumes":
        require_dev("nibabel")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, str(FOLDER / f"{recipe}.py"), "--data-dir", str(tmp_path / recipe)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    lines, data_format = EXPECTED[recipe]
    for line in lines:
        assert line in proc.stdout, proc.stdout
    index = json.loads((tmp_path / recipe / "optimized" / "index.json").read_text())
    assert index["config"]["data_format"] == data_format
