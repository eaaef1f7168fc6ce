"""``litstream migrate``: the LitData-to-litstream codemod (LibCST), its rules table and its command line.

The end-to-end case runs a small project written for LitData (``tests/data/migrate_project/``) with
LitData, migrates a copy with the command, and runs the copy with litstream while LitData cannot be
imported: both must print the same samples. ``tests/test_litdata_readme_scripts.py`` migrates LitData's
README scripts with the same codemod before running them.
"""

from __future__ import annotations

import inspect
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import litstream
from litstream._cli._main import main
from litstream._cli._migrate import migrate_source, unified_diff
from litstream._cli._migrate_rules import ARGUMENT_RULES
from peer import require_peer

ROOT = Path(__file__).resolve().parents[1]
PROJECT = Path(__file__).parent / "data" / "migrate_project"
README_SCRIPTS = Path(__file__).parent / "data" / "litdata_readme"

CASES = [
    ("import litdata as ld\n", "import litstream as ld\n"),
    ("import litdata\nx = litdata.StreamingDataset\n", "import litstream\nx = litstream.StreamingDataset\n"),
    ("from litdata import optimize, StreamingDataset\n", "from litstream import optimize, StreamingDataset\n"),
    (
        "from litdata.streaming import StreamingDataset, TokensLoader\n",
        "from litstream import StreamingDataset, TokensLoader\n",
    ),
    (
        "from litdata.streaming.item_loader import TokensLoader, ParquetLoader\n",
        "from litstream import TokensLoader, ParquetLoader\n",
    ),
    ("from litdata.processing.functions import optimize\n", "from litstream import optimize\n"),
    ("from litdata.utilities.encryption import FernetEncryption\n", "from litstream import FernetEncryption\n"),
    ("from litdata.streaming.resolver import Dir as D\n", "from litstream import Dir as D\n"),
    ("from litdata.debugger import enable_tracer\n", "from litstream.debugger import enable_tracer\n"),
    ("from litdata import *\n", "from litstream import *\n"),
    (
        "import litdata.streaming\nds = litdata.streaming.StreamingDataset('d')\n",
        "import litstream\nds = litstream.StreamingDataset('d')\n",
    ),
    (
        "import litdata.streaming.item_loader as il\nloader = il.TokensLoader(block_size=8)\n",
        "import litstream as il\nloader = il.TokensLoader(block_size=8)\n",
    ),
    (
        "import litdata\nloader = litdata.streaming.item_loader.TokensLoader(block_size=8)\n",
        "import litstream\nloader = litstream.TokensLoader(block_size=8)\n",
    ),
    (
        "from litdata.streaming import (\n    StreamingDataLoader,  # loader\n    StreamingDataset,\n)\n",
        "from litstream import (\n    StreamingDataLoader,  # loader\n    StreamingDataset,\n)\n",
    ),
    ("import os, litdata as ld\n", "import os, litstream as ld\n"),
    # Not LitData: untouched.
    ("import litdatax\nfrom mylitdata import x\nfrom . import litdata\n", None),
    ("obj.litdata.StreamingDataset\ns = 'import litdata'\n", None),
]


@pytest.mark.parametrize(("before", "after"), CASES)
def test_each_import_form_is_rewritten(before: str, after: str | None) -> None:
    result = migrate_source(before)
    assert result.migrated == (before if after is None else after)
    assert result.changed is (after is not None)
    assert migrate_source(result.migrated).migrated == result.migrated  # idempotent


def test_comments_blank_lines_and_quotes_survive() -> None:
    before = (
        "# header comment\n\n"
        "import litdata as ld  # the library\n\n\n"
        "def f():  # trailing\n"
        "    '''Docstring with 'quotes'.'''\n"
        '    return ld.StreamingDataset("x",   shuffle=True)  # odd spacing kept\n'
    )
    after = migrate_source(before).migrated
    assert after == before.replace("import litdata as ld", "import litstream as ld")


def test_a_name_litstream_lacks_stays_with_litdata_and_is_reported() -> None:
    before = "from litdata.utilities.env import _DistributedEnv, Dir\n"
    result = migrate_source(before, "proj/x.py")
    assert result.migrated == "from litstream import Dir\nfrom litdata.utilities.env import _DistributedEnv\n"
    assert [str(f) for f in result.findings] == [
        "proj/x.py:1:1: litdata.utilities.env._DistributedEnv has no litstream equivalent; left as it is"
    ]
    assert migrate_source(result.migrated).migrated == result.migrated
    only_missing = "from litdata.utilities.env import _DistributedEnv\n"
    assert migrate_source(only_missing).migrated == only_missing


def test_a_star_import_from_a_submodule_is_reported_not_rewritten() -> None:
    result = migrate_source("from litdata.streaming import *\n")
    assert not result.changed
    assert "litstream has no module litdata.streaming" in result.findings[0].message


def _call(rule_function: str, argument: str) -> str:
    return f"from litdata import {rule_function}\n{rule_function}('a', {argument}=1)\n"


@pytest.mark.parametrize("rule", ARGUMENT_RULES, ids=lambda r: f"{r.function}.{r.argument}.{r.when}")
def test_every_rule_is_reported_where_it_applies(rule: object) -> None:
    from litstream._cli._migrate_rules import ArgumentRule

    assert isinstance(rule, ArgumentRule)
    name = rule.function
    if rule.when == "given":
        hit = migrate_source(_call(name, rule.argument), "p.py")
        miss = migrate_source(f"from litdata import {name}\n{name}('a', unrelated_argument=1)\n", "p.py")
        assert any(f.message == f"{name}({rule.argument}=...): {rule.note}" for f in hit.findings)
        assert not any(f"({rule.argument}=...)" in f.message for f in miss.findings)
    elif rule.when == "missing":
        hit = migrate_source(f"import litdata as ld\nld.{name}('a')\n", "p.py")
        miss = migrate_source(f"import litdata as ld\nld.{name}('a', {rule.argument}=1)\n", "p.py")
        assert any(f.message == f"{name}() without {rule.argument}=: {rule.note}" for f in hit.findings)
        assert not any(f"without {rule.argument}=" in f.message for f in miss.findings)
    else:
        hit = migrate_source(f"from litdata.processing.functions import {name} as fn\nfn(['a'], 'b')\n", "p.py")
        assert [f.message for f in hit.findings] == [f"{name}({rule.argument}): {rule.note}"]
        assert (hit.findings[0].line, hit.findings[0].column) == (2, 1)


def test_calls_of_other_libraries_are_not_reported() -> None:
    code = "from mylib import optimize\noptimize(num_downloaders=2)\n"
    assert migrate_source(code).findings == ()


@pytest.mark.parametrize("rule", ARGUMENT_RULES, ids=lambda r: f"{r.function}.{r.argument}")
def test_every_rule_names_a_parameter_of_the_litstream_function(rule: object) -> None:
    from litstream._cli._migrate_rules import ArgumentRule

    assert isinstance(rule, ArgumentRule)
    assert rule.argument in inspect.signature(getattr(litstream, rule.function)).parameters


def test_the_docs_table_is_the_rules_table() -> None:
    """docs/migrating-from-litdata.md shows ARGUMENT_RULES row for row (one source of truth)."""
    text = (ROOT / "docs" / "migrating-from-litdata.md").read_text()
    section = text.split("## Arguments that `litstream migrate` reports", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    when = {"given": "passed", "missing": "not passed", "called": "every call"}
    shown = "Test: `tests/test_migrate.py::test_every_rule_is_reported_where_it_applies`"
    expected = [f"| `{r.function}` | `{r.argument}` | {when[r.when]} | {r.note} | {shown} |" for r in ARGUMENT_RULES]
    assert rows == expected


def test_diff_prints_the_change_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "train.py"
    script.write_text("import litdata as ld\n")
    assert main(["migrate", "--diff", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "-import litdata as ld\n+import litstream as ld\n" in out
    assert script.read_text() == "import litdata as ld\n"
    assert unified_diff(migrate_source("x = 1\n")) == ""


def test_check_fails_before_and_passes_after(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "pkg").mkdir()
    module = tmp_path / "pkg" / "data.py"
    module.write_text("from litdata.streaming import StreamingDataset\n")
    module.chmod(0o754)
    assert main(["migrate", "--check", str(tmp_path)]) == 1
    assert f"would migrate {module}" in capsys.readouterr().out
    assert module.read_text() == "from litdata.streaming import StreamingDataset\n"
    assert main(["migrate", str(tmp_path)]) == 0
    assert f"migrated {module}" in capsys.readouterr().out
    assert module.read_text() == "from litstream import StreamingDataset\n"
    assert module.stat().st_mode & 0o777 == 0o754
    assert main(["migrate", "--check", str(tmp_path)]) == 0
    assert "nothing to migrate" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "pkg").iterdir()) == ["data.py"]  # no temporary file left


def test_hidden_folders_virtualenvs_and_links_are_skipped(tmp_path: Path) -> None:
    text = "import litdata\n"
    for folder in (".venv", "venv", "__pycache__", "node_modules", ".git"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "m.py").write_text(text)
    outside = tmp_path.parent / f"{tmp_path.name}-outside.py"
    outside.write_text(text)
    (tmp_path / "link.py").symlink_to(outside)
    (tmp_path / "notes.txt").write_text(text)
    assert main(["migrate", str(tmp_path)]) == 0
    for folder in (".venv", "venv", "__pycache__", "node_modules", ".git"):
        assert (tmp_path / folder / "m.py").read_text() == text
    assert outside.read_text() == text
    assert (tmp_path / "notes.txt").read_text() == text


def test_bad_paths_and_bad_python_are_clear_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["migrate", str(tmp_path / "missing")]) == 1
    assert "is neither a file nor a directory" in capsys.readouterr().err
    broken = tmp_path / "broken.py"
    broken.write_text("import litdata as\n")
    assert main(["migrate", str(broken)]) == 1
    err = capsys.readouterr().err
    assert f"{broken} is not valid Python, so it was not migrated" in err
    assert broken.read_text() == "import litdata as\n"


@pytest.mark.parametrize("script", sorted(p.name for p in README_SCRIPTS.glob("*.py")))
def test_litdata_readme_scripts_migrate_completely(script: str) -> None:
    result = migrate_source((README_SCRIPTS / script).read_text(), script)
    code_lines = [line for line in result.migrated.splitlines() if not line.lstrip().startswith("#")]
    assert not any("litdata" in line for line in code_lines if "import" in line)
    assert migrate_source(result.migrated).migrated == result.migrated


def _run_project(folder: Path, data_root: Path) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run(
        [sys.executable, "train.py", str(data_root)],
        capture_output=True,
        text=True,
        cwd=folder,
        env=env,
        timeout=280,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    printed: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return printed


@pytest.mark.litdata
@pytest.mark.slow
def test_a_litdata_project_gives_the_same_samples_after_migration(tmp_path: Path) -> None:
    require_peer("litdata")
    original = tmp_path / "original"
    shutil.copytree(PROJECT, original)
    with_litdata = _run_project(original, tmp_path / "litdata-data")

    migrated = tmp_path / "migrated"
    shutil.copytree(PROJECT, migrated)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    command = [sys.executable, "-m", "litstream._cli._main", "migrate", str(migrated)]
    check = subprocess.run([*command, "--check"], capture_output=True, text=True, env=env, timeout=120)
    assert check.returncode == 1
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "2 file(s) migrated" in done.stdout
    assert "optimize() without mode=" in done.stderr  # the argument LitData treats differently is reported
    again = subprocess.run([*command, "--check"], capture_output=True, text=True, env=env, timeout=120)
    assert again.returncode == 0, again.stdout
    (migrated / "litdata.py").write_text('raise ImportError("the migrated project must not use LitData")\n')
    with_litstream = _run_project(migrated, tmp_path / "litstream-data")

    assert with_litstream == with_litdata
    assert with_litdata["length"] == 45
