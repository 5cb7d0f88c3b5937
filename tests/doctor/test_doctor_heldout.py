"""The doctor judged on its diagnosis alone, on real logs gathered for issue 26 (tests/fixtures/logs-held,
each with its public source) and on mutations of them (tests/support/logmutate.py).

Method: the logs were gathered first and split before any rule was written (within each kind, the 1st,
3rd, 5th ... log is `tune`, the 2nd, 4th ... `heldout`); the rules were written from the tune half; the
held-out half and its mutations are the figure the README reports. A case counts as right only when the
primary cause is the expected rule: a checklist, an "also found" or a harmless note earns nothing."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import FIXTURES
from tests.support.logmutate import MUTATIONS
from tfgpu_install.doctor.classify import CAUSE, classify
from tfgpu_install.doctor.rules import load_rules

RULES = load_rules()
HELD = FIXTURES / "logs-held"
NEW_RULES = {
    "libstdcxx-too-old", "keras-tf-mismatch", "tf-cpu-instructions-missing", "cuda-init-out-of-memory",
    "cuda-unknown-after-suspend", "tensorflow-gpu-stub-build-failed", "numpy2-abi",
}


def _cases() -> list[dict[str, Any]]:
    return [yaml.safe_load(p.read_text(encoding="utf-8")) for p in sorted(HELD.glob("*.yaml"))]


CASES = _cases()


def _right(text: str, rule: str) -> bool:
    d = classify(text, RULES)
    return d.status == CAUSE and d.primary is not None and d.primary.rule_id == rule


def score(split: str) -> tuple[int, int, list[str]]:
    """(right, total, misses) over the split's logs and every mutation of each."""
    right, total, misses = 0, 0, []
    for case in CASES:
        if case["split"] != split:
            continue
        variants = {"as posted": case["verbatim"]} | {k: f(case["verbatim"]) for k, f in MUTATIONS.items()}
        for name, text in variants.items():
            total += 1
            if _right(text, case["expected"]["rule"]):
                right += 1
            else:
                misses.append(f"{case['id']} ({name})")
    return right, total, misses


def test_fixtures_are_sourced_and_split() -> None:
    assert len(CASES) >= 30
    for case in CASES:
        assert case["source"].startswith("https://"), case["id"]
        assert case["split"] in ("tune", "heldout")
        assert case["verbatim"].strip() and case["expected"]["status"] == CAUSE
    splits = {c["split"] for c in CASES}
    assert splits == {"tune", "heldout"}


def test_each_new_rule_has_three_distinct_real_logs() -> None:
    sources: dict[str, set[str]] = defaultdict(set)
    for case in CASES:
        sources[case["expected"]["rule"]].add(case["source"])
    for rule in NEW_RULES:
        assert len(sources[rule]) >= 3, f"{rule}: {sorted(sources[rule])}"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["id"])
def test_real_log_as_posted(case: dict[str, Any]) -> None:
    d = classify(case["verbatim"], RULES)
    assert d.status == CAUSE
    assert d.primary is not None and d.primary.rule_id == case["expected"]["rule"]
    assert d.primary.evidence and "?" not in d.primary.cause
    assert not d.advice and d.to_json()["checklist"] is None  # a diagnosis comes without the checklist


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_mutations_change_the_text(mutation: str) -> None:
    changed = [c for c in CASES if MUTATIONS[mutation](c["verbatim"]) != c["verbatim"]]
    assert len(changed) >= 10  # the mutation really applies to most logs


def test_heldout_score_reaches_95_percent() -> None:
    right, total, misses = score("heldout")
    assert total >= 15 * (1 + len(MUTATIONS)) // 2
    assert right / total >= 0.95, f"{right}/{total}; misses: {misses}"


def test_tune_half_is_right_too() -> None:
    right, total, misses = score("tune")
    assert right / total >= 0.95, f"{right}/{total}; misses: {misses}"


def _case(case_id: str) -> str:
    return str(next(c for c in CASES if c["id"] == case_id)["verbatim"])


def test_what_stopped_the_program_beats_an_earlier_warning() -> None:
    """A real loader warning the program survived (shared case_037), then a real Keras traceback that
    ended it: the traceback's exception is the diagnosis; the warning is listed, not blamed."""
    from tests.conftest import load_cases

    warning = next(c for c in load_cases("logs") if c["id"] == "case_037")["verbatim"]
    alone = classify(warning, RULES)
    assert alone.primary is not None and alone.primary.rule_id == "cudart-stub-no-cuda"
    d = classify(warning + "\n" + _case("held_keras_2"), RULES)
    assert d.primary is not None and d.primary.rule_id == "keras-tf-mismatch"
    assert "cudart-stub-no-cuda" in {f.rule_id for f in d.others}
    assert "has no attribute 'tf2'" in d.stopped_by


def test_a_warning_the_program_survived_is_not_why_it_stopped() -> None:
    """A real loader warning (shared case_029), then an exception that has nothing to do with the GPU:
    the diagnosis is "unknown" with the exception as the line not explained; the warning is listed."""
    from tests.conftest import load_cases

    warning = next(c for c in load_cases("logs") if c["id"] == "case_029")["verbatim"]
    log = warning + "\nTraceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n" \
        "ValueError: Shapes (None, 10) and (None, 1) are incompatible\n"
    d = classify(log, RULES)
    assert d.status == "unknown" and d.primary is None
    assert "cannot-dlopen-gpu-libs" in {f.rule_id for f in d.others}
    assert any("ValueError: Shapes" in line for line in d.unexplained)
    # the same warning before a GPU exception is still the cause (the exception is its symptom)
    gpu = warning + "\nTraceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n" \
        "tensorflow.python.framework.errors_impl.InvalidArgumentError: Cannot assign a device for operation " \
        "MatMul: node MatMul was explicitly assigned to /device:GPU:0 but available devices are [ /job:localhost/" \
        "replica:0/task:0/device:CPU:0 ]\n"
    d = classify(gpu, RULES)
    assert d.primary is not None and d.primary.rule_id == "cannot-dlopen-gpu-libs"


def test_unknown_names_the_lines_it_could_not_explain() -> None:
    log = ("2025-01-02 10:00:00.000000: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1886] Created device GPU:0\n"
           "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n"
           "    model.fit(ds)\nValueError: Shapes (None, 10) and (None, 1) are incompatible\n")
    d = classify(log, RULES)
    doc = d.to_json()
    assert doc["status"] == "unknown" and doc["primary"] is None
    assert doc["unexplained"] == ["L5: ValueError: Shapes (None, 10) and (None, 1) are incompatible"]
    assert doc["checklist"]["label"].startswith("generic checklist, not a diagnosis")
    assert doc["checklist"]["steps"] == doc["advice"] and len(doc["advice"]) == len(RULES.layers)
    assert doc["stopped_by"] == "L5: ValueError: Shapes (None, 10) and (None, 1) are incompatible"


def test_a_harmless_warning_is_named_harmless_next_to_the_cause() -> None:
    d = classify(MUTATIONS["noise-before"](_case("held_init-oom_1")), RULES)
    assert d.primary is not None and d.primary.rule_id == "cuda-init-out-of-memory"
    assert {"factory-registration", "tensorrt-missing"} <= {f.rule_id for f in d.harmless}


if __name__ == "__main__":  # the README's figure: python -m tests.doctor.test_doctor_heldout
    for split in ("tune", "heldout"):
        r, t, m = score(split)
        print(f"{split}: {r}/{t} = {100 * r / t:.1f}%  misses: {m}")
    print(Path(HELD).relative_to(Path.cwd()) if HELD.is_relative_to(Path.cwd()) else HELD)
