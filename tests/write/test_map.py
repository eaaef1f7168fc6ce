"""map(): file-to-file transforms in worker processes, to a local directory and to S3 (SeaweedFS)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

from litstream import ConfigurationError, OutputNotEmptyError, WorkerError, map

if TYPE_CHECKING:
    from pathlib import Path

    from servers import S3Server


def upper(path: str, output_dir: str) -> None:
    name = os.path.basename(path)
    with open(path) as src, open(os.path.join(output_dir, name), "w") as dst:
        dst.write(src.read().upper())


def nested(i: int, output_dir: str) -> None:
    os.makedirs(os.path.join(output_dir, f"part-{i % 2}"))
    with open(os.path.join(output_dir, f"part-{i % 2}", f"{i}.txt"), "w") as f:
        f.write(str(i))


def with_keywords(i: int, output_dir: str, device: str, is_last: bool) -> None:
    with open(os.path.join(output_dir, f"{i}.txt"), "w") as f:
        f.write(f"{device} {is_last} {os.environ['DATA_OPTIMIZER_GLOBAL_RANK']}")


def returns_a_value(i: int, output_dir: str) -> int:
    return i


def fails_on_3(i: int, output_dir: str) -> None:
    if i == 3:
        raise ValueError("cannot convert 3")
    with open(os.path.join(output_dir, f"{i}.txt"), "w") as f:
        f.write("ok")


@pytest.fixture
def text_files(tmp_path: Path) -> list[str]:
    src = tmp_path / "src"
    src.mkdir()
    for i in range(6):
        (src / f"doc{i}.txt").write_text(f"hello {i}")
    return sorted(str(p) for p in src.iterdir())


def test_map_transforms_files_in_worker_processes(tmp_path: Path, text_files: list[str]) -> None:
    out = tmp_path / "out"
    map(upper, text_files, out, num_workers=2, verbose=False)
    assert sorted(p.name for p in out.iterdir()) == [f"doc{i}.txt" for i in range(6)]
    assert [(out / f"doc{i}.txt").read_text() for i in range(6)] == [f"HELLO {i}" for i in range(6)]


def test_map_keeps_sub_directories_and_leaves_no_temporary_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    map(nested, range(5), out, num_workers=1, verbose=False)
    found = sorted(str(p.relative_to(out)) for p in out.rglob("*.txt"))
    assert found == ["part-0/0.txt", "part-0/2.txt", "part-0/4.txt", "part-1/1.txt", "part-1/3.txt"]


def test_map_passes_device_and_is_last_when_declared(tmp_path: Path) -> None:
    out = tmp_path / "out"
    map(with_keywords, range(4), out, num_workers=2, verbose=False)
    texts = [(out / f"{i}.txt").read_text() for i in range(4)]
    assert texts == ["cpu False 0", "cpu True 0", "cpu False 1", "cpu True 1"]


def test_map_fast_dev_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    map(nested, range(20), out, num_workers=2, fast_dev_run=2, verbose=False)
    assert sorted(p.name for p in out.rglob("*.txt")) == ["0.txt", "1.txt", "10.txt", "11.txt"]


def test_map_fn_must_return_none(tmp_path: Path) -> None:
    with pytest.raises(WorkerError, match=r"fn returned 0 for input 0 \(index 0, worker 0\); map's fn must write"):
        map(returns_a_value, range(3), tmp_path / "out", num_workers=1, verbose=False)  # type: ignore[arg-type]


def test_map_failure_names_the_input(tmp_path: Path) -> None:
    with pytest.raises(WorkerError, match=r"map worker 1 failed: .*fn failed on input 3 \(index 3, worker 1\)") as info:
        map(fails_on_3, range(6), tmp_path / "out", num_workers=2, verbose=False)
    assert isinstance(info.value.__cause__, ValueError)
    assert str(info.value.__cause__) == "cannot convert 3"


def test_map_error_when_not_empty(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("x")
    with pytest.raises(OutputNotEmptyError, match=r"is not empty \(holds old.txt\) and error_when_not_empty=True"):
        map(nested, range(2), out, num_workers=1, error_when_not_empty=True, verbose=False)
    assert [p.name for p in out.iterdir()] == ["old.txt"]
    map(nested, range(2), out, num_workers=1, verbose=False)  # the default adds to what is there
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*.txt")) == ["old.txt", "part-0/0.txt", "part-1/1.txt"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"fn": "upper"}, "fn must be callable"),
        ({"inputs": []}, "inputs must be a non-empty sequence"),
        ({"num_workers": -2}, "num_workers must be a non-negative int"),
        ({"error_when_not_empty": "yes"}, "error_when_not_empty must be True or False"),
        ({"weights": [1]}, "weights has 1 entries but inputs has 3"),
    ],
)
def test_map_bad_arguments_write_nothing(tmp_path: Path, kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"fn": nested, "inputs": [0, 1, 2], "output_dir": tmp_path / "out", "verbose": False}
    args.update(kwargs)
    with pytest.raises(ConfigurationError, match=message):
        map(**args)  # type: ignore[arg-type]
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_map_uploads_to_s3(tmp_path: Path, text_files: list[str], s3_server: S3Server) -> None:
    import uuid

    import boto3

    prefix = f"map-{uuid.uuid4().hex[:10]}"
    map(upper, text_files, f"s3://{s3_server.bucket}/{prefix}", num_workers=2, storage_options=s3_server.options())
    client = boto3.client("s3", **s3_server.options())
    listed = client.list_objects_v2(Bucket=s3_server.bucket, Prefix=prefix + "/")["Contents"]
    assert sorted(o["Key"] for o in listed) == [f"{prefix}/doc{i}.txt" for i in range(6)]
    body = client.get_object(Bucket=s3_server.bucket, Key=f"{prefix}/doc4.txt")["Body"].read()
    assert body == b"HELLO 4"
