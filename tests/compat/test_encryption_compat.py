"""Encrypted datasets between LitData and litstream, both ways: Fernet and RSA, sample and chunk
level, with and without zstd (LitData combines encryption only with whole-chunk compression,
``compression_level="chunk"``). Each side loads the other's key file with its own ``load``.

Samples carry a NumPy array and a bytes leaf, so LitData writes its classic chunk layout (not the
Arrow footer it uses for scalar-only dict samples)."""

from __future__ import annotations

import gc
import json
import shutil
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

import litstream
from clean_litdata import litdata_optimize
from litstream import EncryptionError, FernetEncryption, RSAEncryption, StreamingDataset
from peer import litdata_marks, require_peer

if TYPE_CHECKING:
    from pathlib import Path

litdata = require_peer("litdata")
from litdata.utilities.encryption import FernetEncryption as LitFernet  # noqa: E402
from litdata.utilities.encryption import RSAEncryption as LitRSA  # noqa: E402

pytestmark = litdata_marks(r"ignore:unclosed file <_io\.FileIO:ResourceWarning")

N = 14
CASES = [
    ("fernet", "sample", None),
    ("fernet", "chunk", None),
    ("fernet", "sample", "zstd"),
    ("fernet", "chunk", "zstd"),
    ("rsa", "sample", None),
    ("rsa", "chunk", None),
]


def fernet_sample(i: int) -> dict[str, Any]:
    return {"x": np.arange(i % 4 + 1, dtype=np.int64) * i, "b": b"secret-%d" % i}


def rsa_sample(i: int) -> dict[str, Any]:
    # RSA-OAEP encrypts at most 190 bytes: one tiny item, and one item per chunk at level "chunk"
    return {"x": np.array([i], dtype=np.int8), "b": bytes([i])}


def _check(samples: list[Any], algorithm: str) -> None:
    make = fernet_sample if algorithm == "fernet" else rsa_sample
    assert len(samples) == N
    for i, sample in enumerate(samples):
        want = make(i)
        np.testing.assert_array_equal(np.asarray(sample["x"]), want["x"])
        assert bytes(sample["b"]) == want["b"]


def _options(algorithm: str, compression: str | None) -> dict[str, Any]:
    options: dict[str, Any] = {"chunk_size": 1 if algorithm == "rsa" else 4}
    if compression is not None:
        options["compression"] = compression
    return options


@pytest.mark.parametrize(("algorithm", "level", "compression"), CASES)
def test_litdata_writes_litstream_reads(algorithm: str, level: str, compression: str | None, tmp_path: Path) -> None:
    enc = LitFernet("pw", level=level) if algorithm == "fernet" else LitRSA("pw", level=level)
    out = tmp_path / "litdata"
    extra = {"compression_level": "chunk"} if compression else {}
    litdata_optimize(
        fn=fernet_sample if algorithm == "fernet" else rsa_sample,
        inputs=list(range(N)),
        output_dir=str(out),
        num_workers=1,
        verbose=False,
        encryption=enc,
        **_options(algorithm, compression),
        **extra,
    )
    enc.save(str(tmp_path / "key.json"))
    config = json.loads((out / "index.json").read_text())["config"]
    assert config["encryption"] == {"algorithm": algorithm, "level": level}
    assert config["compression"] == compression

    cls = FernetEncryption if algorithm == "fernet" else RSAEncryption
    key = cls.load(tmp_path / "key.json", "pw")
    ds = StreamingDataset(out, encryption=key)
    _check(list(ds), algorithm)
    _check([ds[i] for i in range(N)], algorithm)
    with pytest.raises(EncryptionError, match="is encrypted"):
        StreamingDataset(out)[0]


@pytest.mark.parametrize(("algorithm", "level", "compression"), CASES)
def test_litstream_writes_litdata_reads(algorithm: str, level: str, compression: str | None, tmp_path: Path) -> None:
    enc = FernetEncryption("pw", level=level) if algorithm == "fernet" else RSAEncryption("pw", level=level)
    out = tmp_path / "litstream"
    litstream.optimize(
        fernet_sample if algorithm == "fernet" else rsa_sample,
        list(range(N)),
        out,
        num_workers=1,
        verbose=False,
        encryption=enc,
        **_options(algorithm, compression),
    )
    enc.save(tmp_path / "key.json")
    cls = LitFernet if algorithm == "fernet" else LitRSA
    # LitData decompresses next to the chunks: give it its own copy
    copy = tmp_path / "litdata-copy"
    shutil.copytree(out, copy)
    ds = litdata.StreamingDataset(str(copy), encryption=cls.load(str(tmp_path / "key.json"), "pw"))
    _check(list(ds), algorithm)
    del ds
    gc.collect()  # LitData's reader leaves chunk files open: close them here, under this module's filter


def test_litdata_encryption_object_reads_litstream_data_directly(tmp_path: Path) -> None:
    # the reader duck-types the object: LitData's own FernetEncryption works as encryption=
    enc = LitFernet("pw", level="chunk")
    out = tmp_path / "d"
    litstream.optimize(fernet_sample, list(range(N)), out, chunk_size=4, num_workers=1, verbose=False, encryption=enc)
    _check(list(StreamingDataset(out, encryption=enc)), "fernet")
