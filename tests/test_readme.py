"""Every code block of README.md runs here, in order, so a snippet that fails is a failing test.

Python blocks run in one namespace (as if pasted into one session) in a fresh directory; bash blocks
run line by line with the installed console script. The README's S3 bucket, ``s3://my-bucket/``, is
the SeaweedFS test server's bucket (under a fresh prefix), reached through the standard ``AWS_*``
variables as the README says. A block is excluded only when the line above its fence is a
``<!-- readme-test: skip (reason) -->`` comment; that list stays short (see the last test).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from servers import S3Server

README = Path(__file__).resolve().parents[1] / "README.md"
SKIP_MARKER = "<!-- readme-test: skip"
_FENCE = re.compile(r"^```(\w*)\s*$")


@dataclass(frozen=True)
class Block:
    language: str
    code: str
    line: int  # 1-based line of the opening fence
    skipped: bool


def readme_blocks(text: str) -> list[Block]:
    """The fenced code blocks of ``text``, in order."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if match is None:
            i += 1
            continue
        start = i
        i += 1
        body: list[str] = []
        while i < len(lines) and lines[i].strip() != "```":
            body.append(lines[i])
            i += 1
        if i == len(lines):
            raise AssertionError(f"README.md:{start + 1}: code block is never closed")
        skipped = start > 0 and lines[start - 1].strip().startswith(SKIP_MARKER)
        blocks.append(Block(match.group(1), "\n".join(body) + "\n", start + 1, skipped))
        i += 1
    return blocks


def test_blocks_are_found_and_tagged() -> None:
    text = "a\n<!-- readme-test: skip (why) -->\n```bash\necho hi\n```\n\n```python\nx = 1\n```\n"
    assert readme_blocks(text) == [Block("bash", "echo hi\n", 3, True), Block("python", "x = 1\n", 7, False)]
    with pytest.raises(AssertionError, match="never closed"):
        readme_blocks("```python\nx = 1\n")


def test_every_block_is_python_or_bash_and_few_are_skipped() -> None:
    blocks = readme_blocks(README.read_text(encoding="utf-8"))
    assert {b.language for b in blocks} <= {"python", "bash"}, [(b.line, b.language) for b in blocks]
    skipped = [b for b in blocks if b.skipped]
    # Only the quick start's set-up commands: they install .venv (CI runs them through .ci/run).
    assert len(skipped) == 1, [b.line for b in skipped]
    assert skipped[0].language == "bash"
    assert "scripts/setup.sh" in skipped[0].code
    assert sum(b.language == "python" and not b.skipped for b in blocks) >= 8


def _run_bash(block: Block, cwd: Path) -> list[str]:
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")])}
    outputs = []
    for raw in block.code.splitlines():
        command = raw.split("#", 1)[0].strip()
        if not command:
            continue
        proc = subprocess.run(shlex.split(command), capture_output=True, text=True, cwd=cwd, env=env, timeout=120)
        assert proc.returncode == 0, f"README.md:{block.line}: {command!r} failed:\n{proc.stderr}"
        outputs.append(proc.stdout)
    return outputs


def test_readme_code_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, s3_server: S3Server) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_server.endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret_key)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    bucket = f"s3://{s3_server.bucket}/readme-{uuid.uuid4().hex[:8]}/"
    namespace: dict[str, Any] = {"__name__": "__readme__"}
    ran = []
    for block in readme_blocks(README.read_text(encoding="utf-8")):
        if block.skipped:
            continue
        code = block.code.replace("s3://my-bucket/", bucket)
        started = time.perf_counter()
        if block.language == "python":
            exec(compile(code, f"README.md, block at line {block.line}", "exec"), namespace)
        else:
            outputs = _run_bash(block, tmp_path)
            if "litstream inspect data/train" in code:
                assert "items:        2000" in outputs[0]
                assert outputs[1].startswith("wrote 1000 samples from 1000 inputs in 4 chunks")
        ran.append(block.line)
        print(f"README.md:{block.line}: {time.perf_counter() - started:.1f} s")
    assert len(ran) >= 9
    assert (tmp_path / "data" / "train" / "index.json").is_file()
