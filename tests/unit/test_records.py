"""The typed records: Measurement, EstimateSummary and RunRecord read and write the JSON fitbench
has always written, key for key; old history rows load; the error against the estimate."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from fitbench.catalog import get_gpu
from fitbench.errors import FitbenchError
from fitbench.estimate.api import estimate
from fitbench.records.measurement import MEASUREMENT_KEYS, Measurement
from fitbench.records.run import (
    RUN_RECORD_SCHEMA,
    EstimateSummary,
    RunRecord,
    WorkloadView,
    migrate_payload,
)
from fitbench.records.sections import (
    DIAGNOSIS_KEYS,
    Diagnosis,
    DistributedLayout,
    MaxBatchCheck,
    MaxBatchSearch,
    SearchProbe,
)
from fitbench.results.agreement import (
    error_vs_estimate,
    max_batch_not_comparable,
    measured_speed,
    not_comparable,
    relative_error,
)
from fitbench.results.assemble import assemble_run_record
from fitbench.results.history import SCHEMA_VERSION, History
from fitbench.workloads.presets import get_workload

SCHEMA2_SQL = Path(__file__).parent / "data" / "history-schema2.sql"


def _measurement(**fields: object) -> dict[str, object]:
    base: dict[str, object] = dict.fromkeys(MEASUREMENT_KEYS)
    base.update(status="ok", device="cuda", warnings=[], step_samples_seconds=[], environment={})
    base.update(fields)
    return base


# ---------------------------------------------------------------------- Measurement


def test_a_measurement_reads_back_to_the_same_json_key_for_key() -> None:
    data = _measurement(hint=None, backend_notes={"a": 1}, step_seconds_mean=0.5, peak_memory_bytes=10)
    data["warnings"] = ["w"]
    m = Measurement.from_dict(data)
    assert m.peak_memory_bytes == 10 and m.warnings == ("w",) and m.backend_notes == {"a": 1}
    assert m.extra == {"step_seconds_mean": 0.5}  # unknown keys are kept
    out = m.to_dict()
    assert out == data and list(out) == list(data)
    assert "hint" in out and "error_type" not in out  # an explicit null stays, an absent key stays absent


def test_with_values_writes_an_optional_key_even_as_null() -> None:
    m = Measurement.from_dict(_measurement())
    assert "end_to_end_tokens_per_second" not in m.to_dict()
    named = m.with_values(end_to_end_tokens_per_second=None)
    assert named.to_dict()["end_to_end_tokens_per_second"] is None
    assert m.completed and m.on_gpu and m.is_verdict
    assert not Measurement.from_dict(_measurement(status="timeout", device="cpu")).is_verdict


def test_the_distributed_layout_and_the_search_are_typed_and_read_back_key_for_key() -> None:
    layout = {
        "strategy": "ddp",
        "nproc": 2,
        "launcher": "torch.distributed.run",
        "process_group": "gloo",
        "per_gpu_batch_size": 4,
        "global_batch_size": 8,
        "data_parallel_degree": 2,
        "steps_fixed": True,
    }
    search = {
        "max_batch": 12,
        "start": 8,
        "limit": 64,
        "reached_limit": False,
        "first_oom": 13,
        "stopped": None,
        "probes": [
            {"batch_size": 13, "status": "oom", "peak_memory_bytes": None, "error": "CUDA out of memory"}
        ],
    }
    data = _measurement(distributed=layout, max_batch_search=search)
    m = Measurement.from_dict(data)
    assert isinstance(m.distributed, DistributedLayout) and m.distributed.global_batch_size == 8
    assert isinstance(m.max_batch_search, MaxBatchSearch) and m.max_batch_search.first_oom == 13
    assert m.max_batch_search.probes == (
        SearchProbe(batch_size=13, status="oom", error="CUDA out of memory"),
    )
    assert m.to_dict() == data and json.dumps(m.to_dict()) == json.dumps(data)
    # A section set in code is typed too, and written back in full.
    set_later = Measurement.from_dict(_measurement()).with_values(max_batch_search=search)
    assert (
        set_later.max_batch_search == m.max_batch_search and set_later.to_dict()["max_batch_search"] == search
    )


def test_sections_stored_by_an_older_or_newer_fitbench_load_and_keep_their_keys() -> None:
    # An older row's search without first_oom or probes, a newer one's key this fitbench does not know.
    old = {"max_batch": 10, "reached_limit": True, "tried_at": "x"}
    search = MaxBatchSearch.from_dict(old)
    assert search.max_batch == 10 and search.first_oom is None and search.probes is None
    assert search.extra == {"tried_at": "x"} and search.to_dict() == old
    partial = {"nproc": 2, "launcher": "paddle.distributed.launch"}
    assert DistributedLayout.from_dict(partial).to_dict() == partial
    diagnosis = {"available": False, "reason": "measured on the CPU: GPU peaks do not apply"}
    assert Diagnosis.from_dict(diagnosis).to_dict() == diagnosis
    # Built in code, every documented key is written.
    assert tuple(Diagnosis(reason="r").to_dict()) == DIAGNOSIS_KEYS


def test_a_max_batch_check_writes_the_documented_keys_in_order() -> None:
    from fitbench.measure.search import Probe, search
    from fitbench.measure.search_bounds import SearchBounds

    def probe(batch: int) -> Probe:
        if batch <= 5:
            return Probe(batch_size=batch, status="ok", peak_memory_bytes=batch * 1000)
        return Probe(batch_size=batch, status="oom", error="out of memory")

    result = search(probe, start=2, limit=64)
    bounds = SearchBounds(
        start=2, limit=64, uncapped_start=40, capped="host_ram", memory_bytes=8, budget_bytes=2
    )
    check = MaxBatchCheck(
        estimated=40,
        search=MaxBatchSearch.from_dict(result.to_dict()),
        capped=bounds.capped,
        uncapped_start=bounds.uncapped_start,
        memory_bytes=bounds.memory_bytes,
        budget_bytes=bounds.budget_bytes,
        comparable=False,
        not_comparable=("cpu",),
    )
    # The block `fitbench run --json` has always written: the search's keys between the estimate's
    # largest batch and the bounds, then whether the two compare.
    expected = {
        "estimated": 40,
        **result.to_dict(),
        **bounds.to_dict(),
        "comparable": False,
        "not_comparable": ["cpu"],
    }
    assert json.dumps(check.to_dict()) == json.dumps(expected)
    assert check.search.max_batch == 5 and check.search.first_oom == 6 and check.capped == "host_ram"


# ---------------------------------------------------------------------- EstimateSummary


def test_an_estimate_summary_is_the_estimates_json() -> None:
    est = estimate(get_workload("llm-6b"), get_gpu("h200"))
    summary = EstimateSummary.from_estimate(est)
    assert (
        summary.peak_memory_bytes == est.peak_memory_bytes and summary.new_tokens == est.workload.new_tokens
    )
    assert list(summary.to_dict().items()) == list(est.to_dict().items())
    assert "limited_by" in summary.extra


# ---------------------------------------------------------------------- RunRecord


def test_a_run_record_round_trips_and_keeps_unknown_keys() -> None:
    data = {
        "schema_version": 1,
        "command": "check",
        "workload": {"name": "llm-6b", "family": "decoder", "mode": "infer"},
        "estimate": None,
        "measurement": _measurement(),
        "environment": {},
        "error_vs_estimate": {"peak_memory": 0.1},
        "scenario": "llm-6b",
        "advice": [],
        "from_a_newer_minor": {"x": 1},
        "run_id": "abcd1234",
    }
    record = RunRecord.from_dict(data)
    assert record.workload_name == "llm-6b" and record.is_generation and record.status == "ok"
    assert record.extra == {"from_a_newer_minor": {"x": 1}}
    assert record.to_dict() == data and list(record.to_dict()) == list(data)
    assert "run_id" not in record.to_dict(ids=False)


def test_an_unversioned_payload_is_migrated() -> None:
    old = {"command": "run", "workload": "llm-6b", "measurement": {"status": "ok", "tokens_per_second": 5.0}}
    record = RunRecord.from_dict(old)
    assert record.schema_version == RUN_RECORD_SCHEMA
    assert (
        record.workload == {"name": "llm-6b"} and record.estimate is None and record.error_vs_estimate == {}
    )
    assert "schema_version" not in old  # the input is left alone
    # The workload is read by attribute; an old row's missing fields are None.
    view = record.workload_view
    assert view == WorkloadView(name="llm-6b") and view.new_tokens is None and not view.is_generation
    stored = {"name": "llm-1b", "precision": "bf16", "batch_size": 4, "new_tokens": 32, "tiny": 1}
    stored |= {"family": "decoder", "mode": "infer", "arch": {"layers": 2}, "seq_len": 64}
    typed = RunRecord.from_dict({"command": "run", "workload": stored})
    assert typed.workload_view.new_tokens == 32 and typed.workload_view.batch_size == 4
    assert typed.tiny and typed.is_generation and typed.workload_name == "llm-1b"
    described = WorkloadView.from_mapping({"name": "bert-base", "params": 110_000_000, "description": "BERT"})
    assert (described.params, described.description) == (110_000_000, "BERT")
    assert WorkloadView.from_mapping(described) is described  # a view already read is kept
    assert typed.to_dict()["workload"] == stored  # the mapping is written back as it was stored
    generation = {
        "workload": {"family": "decoder", "mode": "infer"},
        "measurement": {"tokens_per_second": 5.0},
    }
    migrated = migrate_payload(generation, 0)
    assert migrated["measurement"]["end_to_end_tokens_per_second"] == 5.0


def test_a_newer_record_version_is_refused() -> None:
    with pytest.raises(FitbenchError, match="newer"):
        RunRecord.from_dict({"schema_version": RUN_RECORD_SCHEMA + 1, "command": "run"})


# ---------------------------------------------------------------------- the error against the estimate


def _summary(**fields: object) -> EstimateSummary:
    return EstimateSummary.from_dict(
        {
            "peak_memory_bytes": 110,
            "step_seconds": 0.9,
            "tokens_per_second": 50.0,
            "prefill_seconds": 0.2,
            "max_batch_size": 12,
            **fields,
        }
    )


def test_error_vs_estimate_of_a_training_step() -> None:
    w = get_workload("bert-base-imdb")
    m = Measurement.from_dict(_measurement(peak_memory_bytes=100, step_seconds=1.0, tokens_per_second=40.0))
    errors = error_vs_estimate(_summary(), m, w)
    assert errors == pytest.approx({"peak_memory": 0.10, "step_seconds": -0.10, "tokens_per_second": 0.25})
    assert relative_error(1.0, 0) is None and not_comparable(_summary(), m, w) == []


@pytest.mark.parametrize("name", ["bert-base-imdb", "resnet50-cifar10"])
def test_an_uncompiled_tuned_step_on_a_gpu_is_not_the_step_the_estimate_counts(name: str) -> None:
    w = get_workload(name)
    m = Measurement.from_dict(
        _measurement(
            device="cuda:0", exec_mode="tuned", backend="torch", peak_memory_bytes=100, step_seconds=1.0
        )
    )
    compiled = m.with_values(
        backend_notes={"compiled_step": True, "compile_seconds": 41.0, "cuda_graph": True}
    )
    uncompiled = m.with_values(backend_notes={"compiled_step": False, "cuda_graph": True})
    # The estimate models the compiled tuned step: that one compares, --no-compile's does not.
    assert not_comparable(_summary(), compiled, w) == []
    assert not_comparable(_summary(), uncompiled, w) == ["uncompiled"]
    # Records without the note (the default mode, paddle, older runs) are not judged by it.
    assert not_comparable(_summary(), m, w) == []
    assert not_comparable(_summary(), m.with_values(backend_notes={"cuda_graph": True}), w) == []
    # On the CPU nothing compiles and `cpu` already says why; other reasons still add up.
    on_cpu = uncompiled.with_values(device="cpu")
    assert not_comparable(_summary(), on_cpu, w) == ["cpu"]
    assert not_comparable(_summary(), uncompiled.with_values(warmup_steps=0), w) == [
        "first_run",
        "uncompiled",
    ]


def test_generation_is_comparable_whether_or_not_its_notes_say_compiled() -> None:
    w = get_workload("llm-6b")
    m = Measurement.from_dict(
        _measurement(device="cuda", exec_mode="tuned", decode_seconds=1.0, decode_tokens_per_second=10.0)
    )
    for compiled in (True, False):
        assert not_comparable(_summary(), m.with_values(backend_notes={"compiled_step": compiled}), w) == []


def test_error_vs_estimate_of_generation_uses_one_decode_step() -> None:
    w = get_workload("llm-6b")
    new = w.new_tokens
    assert new
    m = Measurement.from_dict(
        _measurement(
            peak_memory_bytes=100,
            decode_seconds=new * 1.0,
            decode_tokens_per_second=40.0,
            prefill_seconds=0.25,
            tokens_per_second=99.0,
        )
    )
    assert measured_speed(m, w) == (1.0, 40.0)
    errors = error_vs_estimate(_summary(), m, w)
    assert errors["step_seconds"] == pytest.approx(-0.10) and errors["prefill_seconds"] == pytest.approx(-0.2)


def test_no_error_off_the_gpu_not_even_of_the_largest_batch() -> None:
    w = get_workload("bert-base-imdb")
    m = Measurement.from_dict(
        _measurement(device="cpu", step_seconds=1.0, max_batch_search={"max_batch": 10})
    )
    errors = error_vs_estimate(_summary(), m, w)
    # A largest batch found in host RAM says nothing of the GPU card's: its error is null, and why.
    assert errors == dict.fromkeys(("peak_memory", "step_seconds", "tokens_per_second", "max_batch"))
    assert not_comparable(_summary(), m, w) == ["cpu"]
    assert max_batch_not_comparable(m) == ["cpu"]
    on_gpu = m.with_values(device="cuda:0")
    assert error_vs_estimate(_summary(), on_gpu, w)["max_batch"] == pytest.approx(0.2)
    assert max_batch_not_comparable(on_gpu) == []


def test_the_record_takes_errors_of_the_estimate_not_of_its_json() -> None:
    # An out-of-memory estimate's JSON hides its would-be speed; the error is still of that speed.
    w = get_workload("llm-6b")
    est = estimate(w, get_gpu("rtx-3060"))
    assert est.verdict == "oom" and est.to_dict()["tokens_per_second"] is None
    m = Measurement.from_dict(
        _measurement(decode_seconds=1.0, decode_tokens_per_second=10.0, peak_memory_bytes=1)
    )
    record = assemble_run_record(
        command="run", workload=w, estimate=est, measurement=m, gpu=get_gpu("rtx-3060")
    )
    assert record.error_vs_estimate["tokens_per_second"] == pytest.approx(
        relative_error(est.tokens_per_second, 10.0)
    )
    assert record.estimate is not None and record.estimate.tokens_per_second is None
    assert record.diagnosis is not None and record.diagnosis.available


# ---------------------------------------------------------------------- old history files


def test_a_schema2_history_written_by_the_old_code_loads_as_records(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA2_SQL.read_text(encoding="utf-8"))
    conn.close()
    raw = sqlite3.connect(path)
    payloads = {r[0]: json.loads(r[1]) for r in raw.execute("SELECT workload, payload FROM runs")}
    raw.close()

    with History.open(path) as h:
        assert h.schema_version == SCHEMA_VERSION
        generation, training = (
            next(r for r in h.last_records(5) if r.workload_name == name)
            for name in ("llm-6b", "resnet50-cifar10")
        )
        assert generation.schema_version == RUN_RECORD_SCHEMA and generation.command == "run"
        assert generation.measurement is not None and generation.measurement.status == "ok"
        assert (
            generation.measurement.decode_tokens_per_second
            == payloads["llm-6b"]["measurement"]["decode_tokens_per_second"]
        )
        assert generation.estimate is not None and generation.estimate.gpu == "h200"
        assert generation.error_vs_estimate == payloads["llm-6b"]["error_vs_estimate"]
        assert generation.diagnosis is not None
        assert generation.diagnosis.to_dict() == payloads["llm-6b"]["diagnosis"]
        assert training.estimate is None and training.measurement is not None
        assert (
            training.measurement.epoch_seconds == payloads["resnet50-cifar10"]["measurement"]["epoch_seconds"]
        )
        # Nothing of the old payload is lost: written back, it is the same JSON plus its version.
        assert generation.to_dict(ids=False) == {**payloads["llm-6b"], "schema_version": RUN_RECORD_SCHEMA}

        # A record written now carries its version in a column, and reads back equal.
        new_id = h.add_run(generation)
        assert h.get_record(new_id).to_dict(ids=False) == generation.to_dict(ids=False)
        versions = dict(h._rows("SELECT run_id, record_version FROM runs"))
    assert versions[new_id] == RUN_RECORD_SCHEMA
    assert sum(v is None for v in versions.values()) == 2  # the old rows keep their NULL
