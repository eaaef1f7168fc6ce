"""``import litstream`` needs only the core dependencies: every optional extra is imported on first use."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import litstream

# Top-level modules of every optional extra in pyproject.toml (and the test peers): none may be needed to import.
OPTIONAL = (
    "zstandard", "PIL", "cryptography", "pyarrow", "polars", "trio", "tifffile", "soundfile", "av", "nibabel",
    "trimesh", "pdfplumber", "torchcodec", "torch_geometric", "litdata", "streaming", "starlette", "uvicorn",
    "hypercorn", "yaml",
)  # fmt: skip


def _run_blocking(blocked: tuple[str, ...], body: str, cwd: Path) -> str:
    """Run ``body`` in a fresh interpreter (in ``cwd``) in which the top-level modules ``blocked`` cannot be
    imported; check that it exits 0 and return what it printed."""
    code = textwrap.dedent(
        f"""
        import sys

        class _Blocked:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {blocked!r}:
                    raise ImportError(f"{{name}} is blocked in this test")
                return None

        sys.meta_path.insert(0, _Blocked())
        """
    ) + textwrap.dedent(body)
    src = str(Path(litstream.__file__).resolve().parents[1])
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=240,
        env={**__import__("os").environ, "PYTHONPATH": src},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_import_litstream_needs_no_optional_package(tmp_path: Path) -> None:
    body = f"""
        import litstream
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in {OPTIONAL!r})
        print(len(litstream.__all__), loaded)
        """
    assert _run_blocking(OPTIONAL, body, tmp_path).split() == [str(len(litstream.__all__)), "[]"]


def test_a_raw_dataset_without_zstandard_names_the_extra(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.txt").write_text("a")
    body = """
        import litstream
        try:
            litstream.StreamingRawDataset("data", cache_dir="cache")
        except litstream.ConfigurationError as exc:
            print(exc)
        """
    assert "pip install 'litstream[zstd]'" in _run_blocking(("zstandard",), body, tmp_path)
