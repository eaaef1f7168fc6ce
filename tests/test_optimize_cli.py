"""``litstream optimize``: the command runs ``optimize()`` in a subprocess; the dataset it writes is read back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from litstream import ConfigurationError, StreamingDataset
from litstream._cli._optimize import load_fn, parse_inputs

SCRIPT = """
def to_sample(i):
    return {"i": i, "square": i * i}


def from_path(path):
    with open(path) as f:
        return {"name": path.rsplit("/", 1)[-1], "text": f.read()}
"""


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("litstream")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    return subprocess.run([str(exe), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=240)


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "prep.py"
    path.write_text(SCRIPT)
    return path


@pytest.mark.parametrize("fn", ["prep:to_sample", "prep.py:to_sample"])
def test_optimize_command_writes_a_dataset(tmp_path: Path, script: Path, fn: str) -> None:
    out = tmp_path / "out"
    done = _cli(
        "optimize", "--fn", fn, "--inputs", "range(3, 40)", "--output-dir", str(out),
        "--chunk-size", "8", "--num-workers", "2", "--compression", "zstd", "--json",
        cwd=script.parent,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["inputs"], summary["samples"]) == (37, 37)
    ds = StreamingDataset(str(out))
    assert sorted(s["i"] for s in ds) == list(range(3, 40))
    assert all(s["square"] == s["i"] ** 2 for s in ds)
    index = json.loads((out / "index.json").read_text())
    assert index["config"]["compression"] == "zstd"
    assert max(c["chunk_size"] for c in index["chunks"]) == 8


def test_optimize_command_over_a_directory_and_a_file_of_inputs(tmp_path: Path, script: Path) -> None:
    files = tmp_path / "files"
    (files / "sub").mkdir(parents=True)
    for i, name in enumerate(["b.txt", "a.txt", "sub/c.txt"]):
        (files / name).write_text(f"text {i}")
    out = tmp_path / "out"
    done = _cli(
        "optimize", "--fn", "prep.py:from_path", "--dataset", str(files), "--output-dir", str(out),
        "--num-workers", "1", "--quiet", cwd=script.parent,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("wrote 3 samples from 3 inputs in 1 chunks")
    assert [(s["name"], s["text"]) for s in StreamingDataset(str(out))] == [
        ("a.txt", "text 1"),
        ("b.txt", "text 0"),
        ("c.txt", "text 2"),
    ]
    listing = tmp_path / "inputs.txt"
    listing.write_text(f"{files / 'a.txt'}\n\n{files / 'sub' / 'c.txt'}\n")
    done = _cli(
        "optimize", "--fn", "prep.py:from_path", "--inputs", str(listing), "--output-dir", str(out),
        "--mode", "overwrite", "--num-workers", "1", "--quiet", cwd=script.parent,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [s["name"] for s in StreamingDataset(str(out))] == ["a.txt", "c.txt"]


def test_optimize_command_reports_errors(tmp_path: Path, script: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    done = _cli("optimize", "--fn", "prep:to_sample", "--inputs", "[1, 2]", "--output-dir", str(out), cwd=script.parent)
    assert done.returncode == 1
    # OutputNotEmptyError names the fix as this command's flags, not as optimize()'s keyword arguments
    assert done.stderr.strip() == (
        f"litstream: output_dir {out} is not empty (holds keep.txt); pass --mode overwrite to replace it, "
        "--mode append to add to it, or choose an empty directory"
    )
    done = _cli(
        "optimize", "--fn", "prep:nope", "--inputs", "[1]", "--output-dir", str(tmp_path / "o"), cwd=script.parent
    )
    assert (done.returncode, done.stderr.strip()) == (1, "litstream: --fn 'prep:nope': 'prep' has no function 'nope'")
    done = _cli("optimize", "--inputs", "[1]", cwd=script.parent)
    assert done.returncode == 2
    assert "--fn" in done.stderr


def test_help_lists_optimize(tmp_path: Path) -> None:
    done = _cli("--help", cwd=tmp_path)
    assert done.returncode == 0
    assert "optimize" in done.stdout


def test_parse_inputs_forms(tmp_path: Path) -> None:
    assert parse_inputs("range(5)") == [0, 1, 2, 3, 4]
    assert parse_inputs(" [1, 'a', (2, 3)] ") == [1, "a", (2, 3)]
    assert parse_inputs("(7,)") == [7]
    (tmp_path / "in.json").write_text('[{"a": 1}, 2]')
    assert parse_inputs(str(tmp_path / "in.json")) == [{"a": 1}, 2]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("__import__('os').system('true')", "not an existing directory or file"),
        ("range(n)", "not an existing directory or file"),
        ("range(True)", "not an existing directory or file"),
        ("range(not 1)", "not an existing directory or file"),
        ("range(1, 2, 0)", "not an existing directory or file"),
        ("{'a': 1}", "not an existing directory or file"),
        ("[]", "names no inputs"),
        ("range(3, 3)", "names no inputs"),
    ],
)
def test_parse_inputs_refuses_what_is_not_data(spec: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        parse_inputs(spec)


def test_parse_inputs_refuses_a_json_file_that_is_not_an_array(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text('{"a": 1}')
    with pytest.raises(ConfigurationError, match="expected a JSON array, got dict"):
        parse_inputs(str(tmp_path / "bad.json"))
    (tmp_path / "broken.json").write_text("[1,")
    with pytest.raises(ConfigurationError, match="not valid JSON"):
        parse_inputs(str(tmp_path / "broken.json"))


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nocolon", "expected MODULE:FUNCTION"),
        ("mod:1bad", "expected MODULE:FUNCTION"),
        ("missing.py:f", "no such file"),
        ("surely_not_a_module_xyz:f", "cannot import 'surely_not_a_module_xyz'"),
        ("json:JSONDecodeErrorx", "'json' has no function 'JSONDecodeErrorx'"),
    ],
)
def test_load_fn_errors(spec: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        load_fn(spec)


def test_load_fn_from_a_script(script: Path) -> None:
    fn = load_fn(f"{script}:to_sample")
    assert fn(3) == {"i": 3, "square": 9}


def test_output_not_empty_hints_are_spelled_as_flags() -> None:
    from litstream._cli._optimize import _as_flags

    message = (
        "output_dir x is not empty (holds 2 files); it holds an interrupted run's checkpoints: pass "
        "use_checkpoint=True to resume it, pass mode='overwrite' to replace it, mode='append' to add to it"
    )
    assert _as_flags(message) == (
        "output_dir x is not empty (holds 2 files); it holds an interrupted run's checkpoints: pass "
        "--use-checkpoint to resume it, pass --mode overwrite to replace it, --mode append to add to it"
    )
