"""Encrypted datasets written by litstream and read back by every reader (LitData interop is in
``tests/compat/test_encryption_compat.py``): both levels, with and without zstd, Fernet and RSA; a
missing or wrong key is an ``EncryptionError`` naming the dataset, never garbage samples."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from litstream import (
    ConfigurationError,
    EncryptionError,
    FernetEncryption,
    RSAEncryption,
    StreamingDataLoader,
    StreamingDataset,
    TokensLoader,
    astream,
    optimize,
)

if TYPE_CHECKING:
    from pathlib import Path

N = 23
MARKER = b"PLAINTEXT-MARKER"


def _sample(i: int) -> dict[str, Any]:
    return {"i": i, "x": np.arange(i % 5 + 1, dtype=np.int32) * i, "tag": MARKER + str(i).encode()}


def _check(sample: dict[str, Any], i: int) -> None:
    assert sample["i"] == i
    np.testing.assert_array_equal(sample["x"], np.arange(i % 5 + 1, dtype=np.int32) * i)
    assert sample["tag"] == MARKER + str(i).encode()


def _index_of(sample: dict[str, Any]) -> int:
    _check(sample, sample["i"])
    return int(sample["i"])


@pytest.fixture(scope="module", params=[("sample", None), ("chunk", None), ("sample", "zstd"), ("chunk", "zstd:3")])
def encrypted(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    level, compression = request.param
    root = tmp_path_factory.mktemp("enc")
    enc = FernetEncryption("pw", level=level)
    out = root / "data"
    kwargs: dict[str, Any] = {"compression": compression, "encryption": enc, "verbose": False}
    optimize(_sample, list(range(N)), out, chunk_size=6, num_workers=2, **kwargs)
    enc.save(root / "key.json")
    return out, root / "key.json"


def test_index_records_algorithm_and_level_and_files_hold_no_plaintext(encrypted: tuple[Path, Path]) -> None:
    out, key = encrypted
    config = json.loads((out / "index.json").read_text())["config"]
    assert config["encryption"] == {"algorithm": "fernet", "level": json.loads(key.read_text())["level"]}
    chunks = sorted(out.glob("chunk-*.bin"))
    assert len(chunks) == 4
    assert not any(MARKER in path.read_bytes() for path in chunks)


def test_streaming_dataset_reads_it_back(encrypted: tuple[Path, Path]) -> None:
    out, key = encrypted
    ds = StreamingDataset(out, encryption=FernetEncryption.load(key, "pw"))
    samples = list(ds)
    assert len(samples) == N
    for i, sample in enumerate(samples):
        _check(sample, i)
    for i in (N - 1, 0, 7, 13):
        _check(ds[i], i)


@pytest.mark.anyio
async def test_astream_reads_it_back(encrypted: tuple[Path, Path]) -> None:
    out, key = encrypted
    enc = FernetEncryption.load(key, "pw")
    samples = [s async for s in astream(out, encryption=enc, shuffle=True)]
    assert sorted(s["i"] for s in samples) == list(range(N))
    for sample in samples:
        _check(sample, sample["i"])
    ds = StreamingDataset(out, encryption=enc)
    assert [s["i"] async for s in astream(ds)] == list(range(N))  # the dataset's own encryption


def test_dataloader_workers_get_the_key(encrypted: tuple[Path, Path]) -> None:
    out, key = encrypted
    ds = StreamingDataset(out, encryption=FernetEncryption.load(key, "pw"), transform=_index_of)
    loader = StreamingDataLoader(ds, batch_size=4, num_workers=2)
    assert sorted(i for batch in loader for i in batch.tolist()) == list(range(N))


def test_reading_without_the_key_says_so(encrypted: tuple[Path, Path]) -> None:
    out, _ = encrypted
    with pytest.raises(EncryptionError, match=f"{out.name} is encrypted .*FernetEncryption.load"):
        list(StreamingDataset(out))
    with pytest.raises(EncryptionError, match="is encrypted"):
        StreamingDataset(out)[0]


def test_a_wrong_password_is_an_error_not_garbage(encrypted: tuple[Path, Path]) -> None:
    out, key = encrypted
    wrong = FernetEncryption.load(key, "not the password")
    # One chunk in flight: with more, two failing fetches can still arrive as one ExceptionGroup
    # until the task-group collapse in _errors.py learns to merge same-kind failures.
    with pytest.raises(EncryptionError, match=f"cannot decrypt .*{out.name}/chunk-0-0.*wrong key"):
        list(StreamingDataset(out, encryption=wrong, max_pre_download=1))
    with pytest.raises(EncryptionError, match="cannot decrypt"):
        StreamingDataset(out, encryption=wrong)[3]


def test_another_level_or_algorithm_is_refused(encrypted: tuple[Path, Path], tmp_path: Path) -> None:
    out, key = encrypted
    level = json.loads(key.read_text())["level"]
    other = FernetEncryption("pw", level="chunk" if level == "sample" else "sample")
    with pytest.raises(EncryptionError, match=f"at level '{level}'"):
        StreamingDataset(out, encryption=other)[0]
    with pytest.raises(EncryptionError, match="is encrypted with fernet"):
        StreamingDataset(out, encryption=RSAEncryption("pw", level=level))[0]


@pytest.mark.parametrize("level", ["sample", "chunk"])
def test_rsa_for_tiny_samples(level: str, tmp_path: Path) -> None:
    enc = RSAEncryption("pw", level=level)
    optimize(lambda i: {"i": i}, list(range(5)), tmp_path / "d", chunk_size=1, encryption=enc, verbose=False)
    enc.save(tmp_path / "key.json")
    ds = StreamingDataset(tmp_path / "d", encryption=RSAEncryption.load(tmp_path / "key.json", "pw"))
    assert [s["i"] for s in ds] == list(range(5))
    assert ds[4] == {"i": 4}


def test_encryption_on_a_plain_dataset_is_refused(tmp_path: Path) -> None:
    optimize(_sample, list(range(3)), tmp_path / "d", chunk_size=2, num_workers=1, verbose=False)
    with pytest.raises(ConfigurationError, match="is not encrypted"):
        StreamingDataset(tmp_path / "d", encryption=FernetEncryption("pw"))[0]


def test_optimize_refuses_bad_encryption_arguments(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="not an encryption object"):
        optimize(_sample, [1], tmp_path / "a", chunk_size=2, encryption="pw", verbose=False)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="TokensLoader"):
        optimize(
            lambda i: np.arange(4),
            [1],
            tmp_path / "b",
            chunk_size=8,
            item_loader=TokensLoader(),
            encryption=FernetEncryption("pw"),
            verbose=False,
        )
    assert not (tmp_path / "a").exists() or not any((tmp_path / "a").iterdir())


@pytest.mark.anyio
async def test_combined_datasets_each_with_their_own_key(tmp_path: Path) -> None:
    from litstream import CombinedStreamingDataset

    parts = []
    for name, level in (("a", "sample"), ("b", "chunk")):
        enc = FernetEncryption(name, level=level)
        optimize(_sample, list(range(5)), tmp_path / name, chunk_size=2, encryption=enc, num_workers=1, verbose=False)
        parts.append(StreamingDataset(tmp_path / name, encryption=enc))
    combined = CombinedStreamingDataset(parts, iterate_over_all=True)
    assert sorted(s["i"] for s in combined) == sorted([*range(5), *range(5)])
    assert sorted([s["i"] async for s in combined]) == sorted([*range(5), *range(5)])


@pytest.mark.parametrize("level", ["sample", "chunk"])
def test_complete_dataset_with_unlisted_encrypted_chunks(level: str, tmp_path: Path) -> None:
    from litstream import FormatError, complete_dataset
    from litstream.format._index import Index

    enc = FernetEncryption("pw", level=level)
    out = tmp_path / "d"
    optimize(_sample, list(range(9)), out, chunk_size=3, encryption=enc, num_workers=1, verbose=False)
    index = Index.from_json((out / "index.json").read_text())
    (out / "0.index.json").write_text(Index(chunks=index.chunks[:1], config=index.config).to_json())
    (out / "index.json").unlink()  # a run that stopped before its final merge; chunks 1 and 2 unlisted
    if level == "chunk":
        with pytest.raises(FormatError, match=r"encrypted whole .* cannot be read without the key"):
            complete_dataset(out)
        return
    complete_dataset(out)
    assert [s["i"] for s in StreamingDataset(out, encryption=enc)] == list(range(9))


def test_a_password_string_is_refused_at_construction(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="not an encryption object"):
        StreamingDataset(tmp_path, encryption="pw")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="not an encryption object"):
        astream(tmp_path, encryption="pw")  # type: ignore[arg-type]
