"""The kinds the independent audit (tests/fixtures/logs-audit) found with no rule, or with a rule too narrow
(issue 38 item 5, second round): each rule written or widened from real public logs of its own, gathered by
the `search` tool from threads and repositories that no fixture set uses (the audit's included), kept in
tests/fixtures/logs-kinds/kind2_*.yaml with their sources. The audit's own 45 logs taught the kinds only:
no pattern here was copied from them, and they are not used by these tests.

Each test names what it catches: without the rule or the widened pattern, the logs read "unknown" (or the
wrong cause); each rule has a control that must not trigger it."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest
import yaml

from tests.conftest import FIXTURES
from tests.doctor.test_doctor_audit import EARLIER_SETS, audit_cases, repository
from tests.doctor.wild import assert_kind_log, assert_kind_mutations
from tfgpu_install.doctor.classify import classify
from tfgpu_install.doctor.rules import load_rules

RULES = load_rules()
MINE = [yaml.safe_load(p.read_text(encoding="utf-8")) for p in sorted((FIXTURES / "logs-kinds").glob("kind2_*.yaml"))]
NEW_RULES = {
    "directml-no-xla", "jetson-container-no-nvmap", "numpy-aarch64-illegal-instruction",
    "package-tf-version-mismatch", "pip-build-missing-setuptools", "too-many-resources-for-launch",
    "tf-undefined-symbol",
}
# Rules whose patterns were too narrow, and the wording each now also reads.
WIDENED = {
    "keras-tf-mismatch": "a standalone keras importing a TensorFlow internal its TensorFlow lacks (get_config ...)",
    "keras3-legacy-savedmodel": "load_weights(): 'Keras 3 only supports V3 `.keras` and `.weights.h5` files'",
    "nvml-library-missing": "nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1",
}
# Searched for and not found: three public logs outside every fixture set's repositories (the audit's own thread
# is the only other one seen). Each rule stands on the logs it has plus the documents its `source` names.
FEWER_THAN_THREE = {
    "directml-no-xla": 2,  # keras-team/keras#18434 repeats keras-core#556; the plugin's tracker is the audit's
    "jetson-container-no-nvmap": 1,  # the other reports quote the line in prose or come from the audit's repo
    "package-tf-version-mismatch": 1,  # most reports of a moved tensorflow.python name are keras's (keras-tf-mismatch)
}
# The keras 2.x-on-TF-1.x wording `module 'tensorflow._api.v1.compat.v2.compat' has no attribute 'v1'` was
# searched for too: no log outside the audit's repository (bojone/bert4keras) shows it, so no pattern reads it.
COMPAT_V2_COMPAT_LOGS_FOUND = 0


def _sources_of_other_sets() -> tuple[set[str], set[str]]:
    threads: set[str] = set()
    for d in (*EARLIER_SETS, "logs-audit"):
        for p in (FIXTURES / d).glob("*.yaml"):
            case = yaml.safe_load(p.read_text(encoding="utf-8"))
            if not p.name.startswith("kind2_"):
                threads.add(case["source"])
    repos = {r for r in (repository(s) for s in threads) if r}
    return threads, repos


def test_every_kind_has_three_real_logs_or_says_why_not() -> None:
    by_rule: dict[str, set[str]] = defaultdict(set)
    for case in MINE:
        assert case["source"].startswith("https://") and case["verbatim"].strip(), case["id"]
        by_rule[case["expected"]["rule"]].add(case["source"])
    for rule in NEW_RULES | set(WIDENED):
        RULES.by_id(rule)  # exists
        assert len(by_rule[rule]) >= FEWER_THAN_THREE.get(rule, 3), (rule, sorted(by_rule[rule]))
    assert set(FEWER_THAN_THREE) <= NEW_RULES and COMPAT_V2_COMPAT_LOGS_FOUND < 3


def test_the_logs_come_from_threads_and_repositories_no_other_set_uses() -> None:
    """Not the audit's threads or repositories (it must stay a measurement), nor any earlier set's."""
    threads, repos = _sources_of_other_sets()
    audit_repos = {repository(c["source"]) for c in audit_cases()}
    assert audit_repos <= repos  # the check sees the audit
    for case in MINE:
        assert case["source"] not in threads, case["id"]
        repo = repository(case["source"])
        assert repo not in repos, (case["id"], repo)


@pytest.mark.parametrize("case", MINE, ids=lambda c: c["id"])
def test_kind_log_as_posted(case: dict[str, Any]) -> None:
    """Catches the rule's absence (the log read 'unknown', or illegal-instruction-avx for an ARM board)."""
    assert_kind_log(case, RULES)


def test_kind_logs_survive_most_mutations() -> None:
    """Wrapped, prefixed, coloured, Windows-pathed, noise in front: the same cause. Cut-headline misses are
    counted (the ARM logs' first line is the one naming the board)."""
    assert_kind_mutations(MINE, RULES)


def _expected(rule: str) -> list[str]:
    """The verbatim of every earlier set's log whose expected cause is `rule`."""
    paths = [p for d in ("logs-held", "logs-extra") for p in sorted((FIXTURES / d).glob("*.yaml"))]
    cases = [yaml.safe_load(p.read_text(encoding="utf-8")) for p in paths]
    return [c["verbatim"] for c in cases if c["expected"]["rule"] == rule]


def test_controls_each_new_rule_leaves_alone() -> None:
    """Each rule beside a text it must not claim."""
    # an Illegal instruction on x86 (no ARM word in it) is still the missing-AVX reading
    avx = _expected("illegal-instruction-avx")
    assert avx and all(classify(t, RULES).primary.rule_id == "illegal-instruction-avx" for t in avx)  # type: ignore[union-attr]
    # a runtime 'No module named setuptools' (no pip build) is not a build failure
    d = classify("Traceback (most recent call last):\n  File \"train.py\", line 1, in <module>\n"
                 "    import pkg_resources\nModuleNotFoundError: No module named 'setuptools'\n", RULES)
    assert d.primary is None or d.primary.rule_id != "pip-build-missing-setuptools"
    # a missing C symbol that is not TensorFlow's is not a TensorFlow ABI mismatch
    d = classify("ImportError: /x/_foo.so: undefined symbol: PyUnicode_AsUTF8\n", RULES)
    assert d.primary is None or d.primary.rule_id != "tf-undefined-symbol"
    # keras importing a TensorFlow internal is keras's mismatch, the package rule yields to it
    keras = next(c for c in MINE if c["id"] == "kind2_keras_getconfig_yolo3")["verbatim"]
    d = classify(keras, RULES)
    assert d.primary is not None and d.primary.rule_id == "keras-tf-mismatch"
    assert "package-tf-version-mismatch" in {f.rule_id for f in d.others}
    # XLA failing for the CUDA platform is not DirectML
    d = classify("W tensorflow/core/framework/op_kernel.cc:1828] OP_REQUIRES failed at xla_ops.cc:503 : UNIMPLEMENTED: "
                 "Could not find compiler for platform CUDA: NOT_FOUND\n", RULES)
    assert d.primary is None or d.primary.rule_id != "directml-no-xla"


def test_the_widened_rules_still_read_their_old_wording() -> None:
    for rid, text in (
        ("nvml-library-missing", "NVIDIA-SMI couldn't find libnvidia-ml.so library in your system. Please make sure"),
        ("keras3-legacy-savedmodel", "ValueError: File format not supported: filepath=m. Keras 3 only supports V3 "
                                     "`.keras` files and legacy H5 format files (`.h5` extension)."),
        ("keras-tf-mismatch", "AttributeError: module 'tensorflow.compat.v2.__internal__' has no attribute 'tf2'"),
    ):
        d = classify(text + "\n", RULES)
        assert d.primary is not None and d.primary.rule_id == rid, rid


def test_a_keras_frame_must_come_right_before_the_error() -> None:
    """The keras-frame pattern reads keras's own file as the failing frame (within a few lines), not any keras
    path somewhere above an unrelated TensorFlow error."""
    far = ("  File \"/env/lib/python3.8/site-packages/keras/engine/training.py\", line 1, in fit\n"
           + "x\n" * 30 + "AttributeError: module 'tensorflow' has no attribute 'Session'\n")
    d = classify(far, RULES)
    assert d.primary is None or d.primary.rule_id != "keras-tf-mismatch"
    near = far.replace("x\n" * 30, "    return tf.Session()\n")
    d = classify(near, RULES)
    assert d.primary is not None and d.primary.rule_id == "keras-tf-mismatch"

