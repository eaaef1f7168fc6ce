"""``import litstream`` does not import torch; the torch-free API works with torch's import blocked.

Each check runs in a fresh interpreter whose meta path refuses ``torch`` (and ``torch.*``), so a
module that imports torch at import time fails here with a traceback naming it. The rule is
described in ``docs/contributing.md``.
"""

from __future__ import annotations

import os
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path

import litstream
from peer import require_dev

# Modules that may import torch when they are imported: the torch facades, loaded by
# ``litstream.__getattr__`` on first use. Every other module must import without torch.
TORCH_MODULES = frozenset(
    {
        "litstream._torch._collate",
        "litstream._torch._combined",
        "litstream._torch._composite",
        "litstream._torch._dataloader",
        "litstream._torch._dataset",
        "litstream._torch._loader_slots",
        "litstream._torch._parallel",
        "litstream._torch._slots",
        "litstream._torch._split",
    }
)

_BLOCKER = textwrap.dedent(
    """
    import sys

    class _NoTorch:
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ImportError(f"torch is blocked in this test (import of {name!r})")
            return None

    sys.meta_path.insert(0, _NoTorch())
    """
)


def _env() -> dict[str, str]:
    """This environment, with the tested package's source directory first on the path."""
    env = dict(os.environ)
    src = str(Path(litstream.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [env.get("PYTHONPATH")])])
    return env


def _run_without_torch(body: str, cwd: Path) -> str:
    """Run ``body`` in a fresh interpreter that cannot import torch; return its stdout."""
    env = _env()
    code = _BLOCKER + textwrap.dedent(body) + "\nassert 'torch' not in sys.modules, 'torch was imported'\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, env=env, timeout=240)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _library_modules() -> list[str]:
    package = Path(litstream.__file__).resolve().parent
    return sorted(info.name for info in pkgutil.walk_packages([str(package)], prefix="litstream."))


def test_import_litstream_does_not_import_torch(tmp_path: Path) -> None:
    out = _run_without_torch(
        """
        import litstream
        print(litstream.__version__, len(litstream.__all__))
        """,
        tmp_path,
    )
    assert out.split() == [litstream.__version__, str(len(litstream.__all__))]


def test_every_module_outside_the_facades_imports_without_torch(tmp_path: Path) -> None:
    modules = [name for name in _library_modules() if name not in TORCH_MODULES]
    assert "litstream.read.aio._astream" in modules
    out = _run_without_torch(
        f"""
        import importlib
        for name in {modules!r}:
            try:
                importlib.import_module(name)
            except ImportError as exc:
                raise SystemExit(f"{{name}} imports torch at import time; import it inside the function "
                                 f"that needs it, or list the module in TORCH_MODULES ({{exc}})")
        print("ok")
        """,
        tmp_path,
    )
    assert out.strip() == "ok"


def test_torch_modules_list_names_real_modules() -> None:
    assert TORCH_MODULES <= set(_library_modules())


def test_optimize_astream_uploader_and_cli_run_without_torch(tmp_path: Path) -> None:
    out = _run_without_torch(
        """
        import anyio
        import numpy as np
        import litstream as ls
        from litstream._cli._main import main

        ls.optimize(fn=lambda i: {"i": i, "x": np.arange(i, dtype=np.int32), "s": str(i)}, inputs=list(range(20)),
                    output_dir="data", chunk_size=6, num_workers=1, verbose=False)

        async def read():
            got = [s["i"] async for s in ls.astream("data")]
            async with ls.astream("data", shuffle=True, seed=1) as samples:
                shuffled = [s["i"] async for s in samples]
            async with ls.AsyncUploader("ingest", chunk_size=4) as up:
                for i in range(10):
                    await up.add({"i": i})
            ingested = [s["i"] async for s in ls.astream("ingest")]
            return got, sorted(shuffled), ingested

        got, shuffled, ingested = anyio.run(read)
        assert got == list(range(20)), got
        assert shuffled == list(range(20)), shuffled
        assert ingested == list(range(10)), ingested
        sample = anyio.run(lambda: ls.astream("data").__anext__())
        assert sample["x"].dtype == np.int32 and sample["s"] == "0"
        assert main(["inspect", "data"]) == 0
        assert main(["cache", "path"]) == 0
        print("done")
        """,
        tmp_path,
    )
    assert "items:        20" in out
    assert out.strip().endswith("done")


def test_astream_runs_under_trio_without_torch(tmp_path: Path) -> None:
    require_dev("trio")
    out = _run_without_torch(
        """
        import trio
        import litstream as ls

        ls.optimize(fn=lambda i: {"i": i}, inputs=list(range(9)), output_dir="data", chunk_size=4,
                    num_workers=1, verbose=False)

        async def read():
            return [s["i"] async for s in ls.astream("data")]

        print(trio.run(read))
        """,
        tmp_path,
    )
    assert out.strip() == str(list(range(9)))


def test_the_facades_load_torch_on_first_use(tmp_path: Path) -> None:
    code = textwrap.dedent(
        """
        import sys
        import litstream
        assert "torch" not in sys.modules
        from litstream import StreamingDataLoader
        assert "torch" in sys.modules
        # _dataloader imported _dataset: its public class is named "litstream" (pickles by that name) at once
        assert sys.modules["litstream._torch._dataset"].StreamingDataset.__module__ == "litstream"
        assert StreamingDataLoader.__module__ == "litstream"
        from litstream import StreamingDataset
        assert StreamingDataset.__module__ == "litstream"
        assert litstream.StreamingDataset is StreamingDataset
        for name in ("StreamingDataLoader", "CombinedStreamingDataset", "ParallelStreamingDataset", "train_test_split"):
            assert getattr(litstream, name).__module__ == "litstream", name
        assert "StreamingDataLoader" in dir(litstream)
        try:
            litstream.NoSuchName
        except AttributeError as exc:
            print(exc)
        """
    )
    cmd = [sys.executable, "-c", code]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=_env(), timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "module 'litstream' has no attribute 'NoSuchName'"


def test_import_litstream_loads_no_library_module_but_errors_and_version(tmp_path: Path) -> None:
    # Start-up cost (issue 17): ``import litstream`` runs only the package file, the error classes, the
    # version and the terminal capture of ``breakpoint``; every public name is bound on first access.
    out = _run_without_torch(
        """
        import sys
        import litstream
        heavy = sorted(m for m in ("numpy", "anyio", "obstore", "httpx") if m in sys.modules)
        ours = sorted(m for m in sys.modules if m.startswith("litstream."))
        print(heavy, ours)
        litstream.astream
        print("litstream.read.aio._astream" in sys.modules, "astream" in vars(litstream))
        """,
        tmp_path,
    )
    first, second = out.splitlines()
    assert (
        first == "[] ['litstream._core', 'litstream._core._errors', 'litstream._core._terminal', 'litstream._version']"
    )
    assert second == "True True"
