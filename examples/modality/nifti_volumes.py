"""Medical volumes: the NIfTI sample scans that nibabel ships, stored as files and streamed as images.

1. ``litstream.list_media_folder(<nibabel>/tests/data, kind="nifti")`` lists the ``.nii`` and
   ``.nii.gz`` files in nibabel's test data folder (real, small anatomical and functional scans);
   the recipe keeps the NIfTI-1 files nibabel can read as ``Nifti1Image``.
2. ``litstream.optimize`` writes ``{"scan": Nifti(path=...), "name": str}``; the file bytes are stored
   unchanged (gzip included: ``data_format`` ``"nifti:gz"`` or ``"nifti:nii"``, as LitData records).
3. Streaming returns ``nibabel.Nifti1Image`` objects; the recipe checks each volume's shape, affine
   and voxel sum against nibabel's own reading of the file. Prints one line per scan and
   ``volumes matching: k/n``; exits 1 unless all match.

Needs the ``nifti`` extra: ``pip install "litstream[nifti]"``.

Run: ``python examples/modality/nifti_volumes.py [--data-dir D]``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import nibabel as nib
import numpy as np
from _common import data_dir_from_args, fresh

import litstream

NIBABEL_DATA = Path(nib.__file__).parent / "tests" / "data"


def nifti1_files() -> list[str]:
    files = [item["path"] for item in litstream.list_media_folder(str(NIBABEL_DATA), kind="nifti")]
    return [f for f in files if type(nib.load(f)) is nib.Nifti1Image][:4]


def to_sample(path: str) -> dict[str, Any]:
    return {"scan": litstream.Nifti(path=path), "name": Path(path).name}


def main(argv: list[str] | None = None) -> int:
    root = data_dir_from_args("nifti_volumes", __doc__ or "", argv)
    out = fresh(root) / "optimized"
    files = nifti1_files()
    litstream.optimize(to_sample, files, out, chunk_bytes="8MB", num_workers=1, verbose=False)
    matching = 0
    by_name = {Path(f).name: nib.load(f) for f in files}
    for sample in litstream.StreamingDataset(out):
        scan, original = sample["scan"], by_name[sample["name"]]
        same = (
            scan.shape == original.shape
            and np.allclose(scan.affine, original.affine)
            and float(np.asarray(scan.dataobj, dtype=np.float64).sum())
            == float(np.asarray(original.dataobj, dtype=np.float64).sum())
        )
        matching += same
        print(f"{sample['name']}: shape {scan.shape}, voxel {scan.header.get_zooms()[:3]} {'ok' if same else 'DIFF'}")
    print(f"volumes matching: {matching}/{len(files)}")
    return 0 if matching == len(files) and files else 1


if __name__ == "__main__":
    sys.exit(main())
