"""``litstream.debugger.enable_tracer``: a Chrome trace of what each process of a loader did."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

import litstream
from litstream import debugger
from litstream._core._trace import TRACER, Tracer, part_files

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from servers import S3Server

CHUNKS = 6
ITEMS = 24  # 4 items per chunk


def _sample(i: int) -> dict[str, Any]:
    return {"i": i, "x": np.full(64, i, dtype=np.int64)}


@pytest.fixture(autouse=True)
def _tracer_off(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """Every test starts and ends with tracing off and no trace variable in the environment."""
    monkeypatch.delenv("LITSTREAM_TRACE", raising=False)
    monkeypatch.delenv("LITSTREAM_TRACE_FILE", raising=False)
    yield
    debugger.enable_tracer("off", log_file=str(TRACER.path or tmp_path / "unused.json"))
    assert not TRACER.on
    assert "LITSTREAM_TRACE" not in os.environ


def _optimize(output: str, **kwargs: Any) -> str:
    litstream.optimize(fn=_sample, inputs=list(range(ITEMS)), output_dir=output, chunk_size=ITEMS // CHUNKS,
                       num_workers=1, **kwargs)  # fmt: skip
    return output


def _load(trace: Path) -> list[dict[str, Any]]:
    document = json.loads(trace.read_text(encoding="utf-8"))
    events: list[dict[str, Any]] = document["traceEvents"]
    return events


def _spans(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["ph"] == "X"]


def _worker_pids(events: list[dict[str, Any]]) -> dict[str, int]:
    """``{"DataLoader worker 0": pid, ...}`` from the process-name metadata."""
    out: dict[str, int] = {}
    for e in events:
        if e["ph"] == "M" and e["name"] == "process_name" and e["args"]["name"].startswith("DataLoader worker"):
            out[e["args"]["name"].split(" (")[0]] = e["pid"]
    return out


def _check_spans(events: list[dict[str, Any]]) -> None:
    for e in _spans(events):
        assert e["dur"] >= 0, e
        assert e["ts"] > 1.6e15, e  # microseconds on the wall clock (after 2020)
        assert isinstance(e["pid"], int)
        assert isinstance(e["tid"], int)


def _run(dataset: litstream.StreamingDataset, num_workers: int) -> int:
    loader = litstream.StreamingDataLoader(dataset, batch_size=4, num_workers=num_workers)
    return sum(len(batch["i"]) for batch in loader)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_local_dataset_trace_has_reads_decodes_batches_per_worker(tmp_path: Path, num_workers: int) -> None:
    data = _optimize(str(tmp_path / "ds"))
    trace = tmp_path / "trace" / "run.json"
    debugger.enable_tracer(log_file=str(trace))
    assert _run(litstream.StreamingDataset(data), num_workers) == ITEMS
    assert debugger.merge_traces() == trace
    events = _load(trace)
    _check_spans(events)
    spans = _spans(events)
    names = Counter(e["name"] for e in spans)
    assert names["read"] == CHUNKS  # each chunk opened once, by one process
    assert names["decode"] >= CHUNKS
    assert names["batch"] == ITEMS // 4
    assert names["dataloader"] == 1
    assert sum(e["args"]["items"] for e in spans if e["name"] == "decode") == ITEMS
    main = os.getpid()
    assert {e["pid"] for e in spans if e["name"] in ("batch", "dataloader")} == {main}
    if num_workers == 0:
        assert {e["pid"] for e in spans} == {main}
    else:
        workers = _worker_pids(events)
        assert sorted(workers) == ["DataLoader worker 0", "DataLoader worker 1"]
        assert main not in workers.values()
        assert {e["pid"] for e in spans if e["name"] == "read"} == set(workers.values())
        assert len(part_files(trace)) == 3  # main and each worker wrote its own file


@pytest.mark.parametrize("num_workers", [0, 2])
def test_s3_dataset_trace_has_one_download_per_chunk(tmp_path: Path, s3_server: S3Server, num_workers: int) -> None:
    url = f"s3://{s3_server.bucket}/trace-{uuid.uuid4().hex[:8]}"
    options = s3_server.options()
    _optimize(url, storage_options=options)
    trace = tmp_path / "s3.json"
    debugger.enable_tracer("debug", log_file=str(trace), flush_interval=0)
    dataset = litstream.StreamingDataset(url, storage_options=options, cache_dir=tmp_path / "cache",
                                         max_cache_size=1, cache_chunks=True)  # fmt: skip # each released chunk deleted
    assert _run(dataset, num_workers) == ITEMS
    events = _load(debugger.merge_traces())
    _check_spans(events)
    spans = _spans(events)
    downloads = [e for e in spans if e["name"] == "download"]
    assert len(downloads) == CHUNKS
    assert sorted(e["args"]["chunk"] for e in downloads) == sorted(f"chunk-0-{k}.bin" for k in range(CHUNKS))
    assert all(e["args"]["ok"] for e in downloads)
    names = Counter(e["name"] for e in spans)
    assert names["read"] == CHUNKS
    assert names["cache write"] >= CHUNKS
    assert names["lock"] >= CHUNKS  # "debug" level
    assert names["delete"] >= CHUNKS - max(num_workers, 1)  # all but the last chunk of each process at least
    readers = {e["pid"] for e in downloads}
    if num_workers == 2:
        assert readers == set(_worker_pids(events).values())
        assert len(readers) == 2
    else:
        assert readers == {os.getpid()}


def test_disabled_tracer_writes_nothing(tmp_path: Path) -> None:
    data = _optimize(str(tmp_path / "ds"))
    out = tmp_path / "trace"
    out.mkdir()
    debugger.enable_tracer("off", log_file=str(out / "t.json"))
    assert not debugger.is_tracing("read")
    assert _run(litstream.StreamingDataset(data), 2) == ITEMS
    assert list(out.iterdir()) == []
    assert TRACER._events == []


def test_batch_level_records_only_epochs_and_batches(tmp_path: Path) -> None:
    data = _optimize(str(tmp_path / "ds"))
    trace = tmp_path / "batch.json"
    debugger.enable_tracer("batch", log_file=str(trace))
    assert debugger.active_categories() == {"epoch", "batch", "crash"}
    assert _run(litstream.StreamingDataset(data), 0) == ITEMS
    names = Counter(e["name"] for e in _spans(_load(debugger.merge_traces())))
    assert names == {"batch": ITEMS // 4, "dataloader": 1}


def test_levels_categories_and_switches_as_litdata(tmp_path: Path) -> None:
    assert set(debugger.LEVEL_CATEGORIES) == {"off", "batch", "chunk", "sample", "debug"}
    debugger.enable_tracer(categories=["download", "READ"], log_file=str(tmp_path / "a.json"))
    assert debugger.active_categories() == {"download", "read"}
    debugger.enable_tracer("debug", iterating_dataset=False, item_loader=False, log_file=str(tmp_path / "a.json"))
    assert "epoch" not in debugger.active_categories()
    assert "sample" not in debugger.active_categories()
    assert "lock" in debugger.active_categories()
    with pytest.raises(ValueError, match="Unknown tracer level 'loud'"):
        debugger.enable_tracer("loud")
    with pytest.raises(litstream.ConfigurationError, match=r"unknown \['reads'\]"):
        debugger.enable_tracer(categories=["reads"])
    with pytest.raises(litstream.ConfigurationError, match="flush_interval must be"):
        debugger.enable_tracer(flush_interval=-1)


def test_logger_messages_become_instant_events_and_off_writes_the_trace(tmp_path: Path) -> None:
    trace = tmp_path / "log.json"
    logger = debugger.enable_tracer(log_file=str(trace))
    logger.info("epoch 3 starts")
    debugger.enable_tracer("off", log_file=str(trace))  # writes the trace
    marks = [e for e in _load(trace) if e["ph"] == "i"]
    assert [(m["name"], m["args"]["level"]) for m in marks] == [("epoch 3 starts", "INFO")]


def test_enable_removes_parts_of_an_earlier_run(tmp_path: Path) -> None:
    trace = tmp_path / "t.json"
    stale = tmp_path / "t.pid1.json"
    stale.write_text('{"traceEvents": [{"ph": "X", "name": "old"}]}', encoding="utf-8")
    debugger.enable_tracer(log_file=str(trace))
    assert not stale.exists()


def test_merge_traces_needs_a_file_when_never_enabled_here() -> None:
    code = (
        "import litstream\n"
        "from litstream import debugger\n"
        "try:\n"
        "    debugger.merge_traces()\n"
        "except litstream.ConfigurationError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})  # fmt: skip
    assert "log_file=" in done.stdout  # a fresh process, where tracing was never enabled


def test_importing_debugger_is_cheap_and_torch_free() -> None:
    code = (
        "import sys, litstream; d = litstream.debugger; d.enable_tracer; "
        "assert 'torch' not in sys.modules, 'torch'; assert 'litstream.read.source._source' not in sys.modules; "
        "import litstream.debugger; assert litstream.debugger is d; print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})  # fmt: skip
    assert done.stdout.strip() == "ok", done.stderr


def test_spawned_workers_get_the_settings_from_the_loader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = _optimize(str(tmp_path / "ds"))
    trace = tmp_path / "spawn.json"
    debugger.enable_tracer(log_file=str(trace))
    monkeypatch.delenv("LITSTREAM_TRACE")  # not inherited from the environment: only the loader hands them on
    monkeypatch.delenv("LITSTREAM_TRACE_FILE")
    loader = litstream.StreamingDataLoader(litstream.StreamingDataset(data), batch_size=4, num_workers=2,
                                           multiprocessing_context="spawn")  # fmt: skip
    assert sum(len(batch["i"]) for batch in loader) == ITEMS
    events = _load(debugger.merge_traces())
    workers = _worker_pids(events)
    assert len(workers) == 2
    assert {e["pid"] for e in _spans(events) if e["name"] == "read"} == set(workers.values())


def test_part_file_is_rewritten_by_events_after_flush_interval(tmp_path: Path) -> None:
    trace = tmp_path / "periodic.json"
    passed = [0]  # nanoseconds the tracer's clock is ahead of perf_counter_ns
    tracer = Tracer(clock=lambda: time.perf_counter_ns() + passed[0])
    tracer.configure({"read"}, trace, owner=True, flush_interval=3600)
    try:
        tracer.span("read", "read", 0)  # the first event: the part is due in an hour
        part = tracer.part_path()
        assert part is not None
        assert not part.exists()
        passed[0] = 3601 * 10**9  # the hour has passed
        tracer.span("read", "read", 0)
        assert [e["name"] for e in _spans(_load(part))] == ["read", "read"]
        assert not trace.exists()  # only merges write the trace file
    finally:
        tracer.configure((), None, owner=False, flush_interval=0)


def test_optimize_records_one_write_per_chunk(tmp_path: Path) -> None:
    trace = tmp_path / "write.json"
    debugger.enable_tracer(log_file=str(trace))
    _optimize(str(tmp_path / "ds"))
    writes = [e for e in _spans(_load(debugger.merge_traces())) if e["name"] == "write chunk"]
    assert sorted(e["args"]["chunk"] for e in writes) == sorted(f"chunk-0-{k}.bin" for k in range(CHUNKS))
    assert sum(e["args"]["items"] for e in writes) == ITEMS


def test_full_part_files_leave_memory_and_all_are_merged(tmp_path: Path) -> None:
    trace = tmp_path / "seg.json"
    tracer = Tracer(segment_events=3)
    tracer.configure({"read"}, trace, owner=True, flush_interval=0)
    try:
        for k in range(7):
            tracer.span("read", "read", 0, {"chunk": k})
            tracer.flush()
        assert len(tracer._events) == 1  # the 7th; six were written to full parts
        pid = os.getpid()
        names = [p.name for p in part_files(trace)]
        assert names == [f"seg.pid{pid}-1.json", f"seg.pid{pid}-2.json", f"seg.pid{pid}.json"]
        merged = tracer.finish()  # the owner merges every part into the trace file
        assert merged == trace
        events = _spans(_load(merged))
        assert sorted(e["args"]["chunk"] for e in events) == list(range(7))
    finally:
        tracer.configure((), None, owner=False, flush_interval=0)


def test_trace_span_records_user_code(tmp_path: Path) -> None:
    trace = tmp_path / "user.json"
    debugger.enable_tracer("batch", log_file=str(trace))
    with debugger.trace_span("train step", "batch", step=3):
        pass
    with debugger.trace_span("not recorded", "download"):
        pass
    spans = _spans(_load(debugger.merge_traces()))
    assert [(e["name"], e["args"]) for e in spans] == [("train step", {"step": 3})]


def test_emit_trace_pairs_begin_and_end_into_spans(tmp_path: Path) -> None:
    trace = tmp_path / "emit.json"
    debugger.enable_tracer("batch", log_file=str(trace))
    debugger.emit_trace("step", "B", "batch", n=1)
    debugger.emit_trace("inner", "B", "batch")
    debugger.emit_trace("inner", "E", "batch", rows=5)
    debugger.emit_trace("step", "E", "batch")
    debugger.emit_trace("orphan", "E", "batch")  # no "B": dropped
    debugger.emit_trace("mark", "i", "epoch", where="here")
    debugger.emit_trace("skipped", "B", "download")  # a category this level does not record
    events = _load(debugger.merge_traces())
    spans = {e["name"]: e for e in _spans(events)}
    assert set(spans) == {"step", "inner"}
    assert spans["step"]["args"] == {"n": 1}
    assert spans["inner"]["args"] == {"rows": 5}
    assert spans["step"]["ts"] <= spans["inner"]["ts"]
    assert spans["inner"]["ts"] + spans["inner"]["dur"] <= spans["step"]["ts"] + spans["step"]["dur"]
    assert [(e["name"], e["args"]) for e in events if e["ph"] == "i"] == [("mark", {"where": "here"})]


@pytest.mark.litdata
def test_enable_tracer_has_litdatas_parameters_and_levels() -> None:
    import inspect

    from peer import require_peer

    require_peer("litdata")
    import litdata.debugger as theirs

    ours_params = inspect.signature(debugger.enable_tracer).parameters
    their_params = inspect.signature(theirs.enable_tracer).parameters
    assert list(ours_params) == list(their_params)
    differing = {n for n, p in their_params.items() if repr(p.default) != repr(ours_params[n].default)}
    assert differing == {"log_file"}  # a JSON trace, not LitData's log lines (docs/tracing.md)
    assert set(debugger.LEVEL_CATEGORIES) == set(theirs.LEVEL_CATEGORIES)
    for helper in ("emit_trace", "trace_span", "is_tracing", "active_categories"):
        assert list(inspect.signature(getattr(debugger, helper)).parameters) == list(
            inspect.signature(getattr(theirs, helper)).parameters
        ), helper
    for level, categories in theirs.LEVEL_CATEGORIES.items():
        assert categories <= debugger.LEVEL_CATEGORIES[level]
        assert debugger.LEVEL_CATEGORIES[level] - categories <= {"write"}
