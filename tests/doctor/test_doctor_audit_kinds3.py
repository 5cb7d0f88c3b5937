"""The kinds the second and third audits (tests/fixtures/logs-audit2, logs-audit3) found with no rule, or with a
rule too narrow (issue 38 item 5, third round): each rule written or widened from real public logs of its own,
found with the `search` tool in threads no fixture set uses and in repositories no audit set uses, kept in
tests/fixtures/logs-kinds/kind3_*.yaml with their sources. The audits' logs taught the kinds only: no pattern
here was copied from them, and they are not used by these tests. logs-audit3 was measured blind (33/42,
tests/doctor/test_doctor_audit3.py) before any of this was written.

Each test names what it catches: without the rule or the widened pattern, the logs read "unknown" (or another
cause); each rule has a control that must not trigger it."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest
import yaml

from tests.conftest import FIXTURES
from tests.doctor.test_doctor_audit import EARLIER_SETS, earlier_sources, repository
from tests.doctor.wild import assert_kind_log, assert_kind_mutations
from tfgpu_install.doctor.classify import classify
from tfgpu_install.doctor.rules import load_rules

RULES = load_rules()
MINE = [yaml.safe_load(p.read_text(encoding="utf-8")) for p in sorted((FIXTURES / "logs-kinds").glob("kind3_*.yaml"))]
AUDIT_SETS = ("logs-audit", "logs-audit2", "logs-audit3")
NEW_RULES = {"tf1-api-under-tf2", "tf-trt-needs-tensorrt"}
# Rules whose patterns were too narrow, and the wording each now also reads.
WIDENED = {
    "cudnn-init-failed": "TF 1.x's lowercase 'could not create cudnn handle: CUDNN_STATUS_...'",
    "driver-library-mismatch": "nvidia-container-cli's lowercase 'nvml error: driver/library version mismatch'",
    "insufficient-driver": "nvidia-container-cli: requirement error: unsatisfied condition: cuda>=X.Y",
    "nvidia-smi-no-driver": "nvidia-container-cli: initialization error: nvml error: driver not loaded",
    "libcuda-missing": "TF 0.x/1.x's 'Couldn't open CUDA library libcuda.so.1'",
    "missing-cuda-dll": "TF 1.x-2.0's self check 'Could not find 'cudart64_NN.dll''",
    "protobuf-descriptors": "the message's later lines ('... must be regenerated with protoc >= 3.19.0', its link)",
    "libcuda-kernel-mismatch": "the 'libcuda reported version' and kernel module version lines, differing",
}
# Searched for and not found: three public logs in threads no set uses, outside the audits' repositories (the
# NVIDIA container repositories are all in other sets). Each stands on the logs it has and the message's source.
FEWER_THAN_THREE = {
    "nvidia-smi-no-driver": 2,  # nvml 'driver not loaded': NVIDIA/nvidia-docker, -container-toolkit threads are used
    "libcuda-kernel-mismatch": 2,  # the version pair without its 'does not match' line: one thread is used already
}


def test_every_kind_has_three_real_logs_or_says_why_not() -> None:
    by_rule: dict[str, set[str]] = defaultdict(set)
    for case in MINE:
        assert case["source"].startswith("https://github.com/") and case["verbatim"].strip(), case["id"]
        by_rule[case["expected"]["rule"]].add(case["source"])
    assert set(by_rule) == NEW_RULES | set(WIDENED)
    for rule in NEW_RULES | set(WIDENED):
        RULES.by_id(rule)  # exists
        assert len(by_rule[rule]) >= FEWER_THAN_THREE.get(rule, 3), (rule, sorted(by_rule[rule]))
    assert set(FEWER_THAN_THREE) <= set(WIDENED)


def test_the_logs_come_from_threads_no_set_uses_and_repositories_no_audit_uses() -> None:
    """Not a thread of any other set (the second round's kind2 logs included), and not a repository of an
    audit set: the audits must stay a measurement."""
    others = {s for s in earlier_sources((*EARLIER_SETS, *AUDIT_SETS))}
    mine = {c["source"] for c in MINE}
    audit_repos = {repository(s) for s in earlier_sources(AUDIT_SETS)} - {""}
    assert "llsourcell/music_generator_demo" in audit_repos and "tensorflow/tensorrt" in audit_repos  # it sees them
    for case in MINE:
        assert repository(case["source"]) not in audit_repos, case["id"]
    # every kind3 thread is its own (earlier_sources includes logs-kinds, so count the other files)
    theirs = {yaml.safe_load(p.read_text(encoding="utf-8"))["source"]
              for d in (*EARLIER_SETS, *AUDIT_SETS) for p in (FIXTURES / d).glob("*.yaml")
              if not p.name.startswith("kind3_")}
    assert not mine & theirs and mine <= others and len(mine) == len(MINE)


@pytest.mark.parametrize("case", MINE, ids=lambda c: c["id"])
def test_kind_log_as_posted(case: dict[str, Any]) -> None:
    """Catches the rule's absence or a pattern too narrow (the log read 'unknown', or another cause)."""
    assert_kind_log(case, RULES)


def test_kind_logs_survive_most_mutations() -> None:
    """Wrapped, prefixed, coloured, Windows-pathed, noise in front: the same cause. Only cut-headline may miss
    (three logs whose one decisive line is their first)."""
    assert_kind_mutations(MINE, RULES)


def _primary(text: str) -> str | None:
    d = classify(text, RULES)
    return d.primary.rule_id if d.primary else None


def test_controls_each_new_rule_leaves_alone() -> None:
    """Each rule beside a text it must not claim."""
    # a TF2 attribute missing for another reason (a typo, a TF2-only name under TF1, a broken install that
    # lacks even tf.train) is not TF1 code under TF2
    assert _primary("AttributeError: module 'tensorflow' has no attribute 'train'\n") != "tf1-api-under-tf2"
    assert _primary("AttributeError: module 'tensorflow' has no attribute 'sessionn'\n") != "tf1-api-under-tf2"
    assert _primary("AttributeError: module 'tensorflow' has no attribute 'function'\n") != "tf1-api-under-tf2"
    # keras's own file as the failing frame: keras's mismatch wins, the TF1 reading yields to it
    near = ("  File \"/env/lib/python3.8/site-packages/keras/backend/tensorflow_backend.py\", line 1, in f\n"
            "    return tf.Session()\nAttributeError: module 'tensorflow' has no attribute 'Session'\n")
    assert _primary(near) == "keras-tf-mismatch"
    # TensorRT's optional notice alone (no TF-TRT step asked for it) stays harmless
    notice = ("W tensorflow/compiler/tf2tensorrt/utils/py_utils.cc:38] TF-TRT Warning: Could not find TensorRT\n")
    d = classify(notice, RULES)
    assert d.primary is None and {f.rule_id for f in d.harmless} == {"tensorrt-missing"}
    # the driver's own nvcuda.dll missing is no CUDA runtime DLL of the wrong major
    assert _primary("ImportError: Could not find 'nvcuda.dll'. TensorFlow requires that this DLL be installed\n") \
        != "missing-cuda-dll"
    # equal libcuda and kernel module versions are no mismatch (cuInit's no-device reading stays)
    same = ("I x.cc:1] libcuda reported version is: 450.57.0\n"
            "I x.cc:2] driver version file contents: \"\"\"NVRM version: NVIDIA UNIX x86_64 "
            "Kernel Module  450.57  Sun\n"
            "I x.cc:3] kernel reported version is: 450.57.0\n"
            "E x.cc:4] failed call to cuInit: CUDA_ERROR_NO_DEVICE\n")
    assert _primary(same) == "cuinit-no-device"
    # another nvidia-container-cli requirement (a driver branch, not a CUDA version) is not read as a CUDA one
    assert _primary("nvidia-container-cli: requirement error: unsatisfied condition: brand = tesla\n") \
        != "insufficient-driver"


def test_the_widened_rules_still_read_their_old_wording() -> None:
    for rid, text in (
        ("cudnn-init-failed", "E tensorflow/stream_executor/cuda/cuda_dnn.cc:329] Could not create cudnn handle: "
                              "CUDNN_STATUS_INTERNAL_ERROR"),
        ("driver-library-mismatch", "Failed to initialize NVML: Driver/library version mismatch"),
        ("insufficient-driver", "CUDA driver version is insufficient for CUDA runtime version"),
        ("nvidia-smi-no-driver", "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."),
        ("libcuda-missing", "W dso_loader.cc:64] Could not load dynamic library 'libcuda.so.1'; dlerror: "
                            "libcuda.so.1: cannot open shared object file: No such file or directory"),
        ("missing-cuda-dll", "W dso_loader.cc:64] Could not load dynamic library 'cudart64_110.dll'; dlerror: "
                             "cudart64_110.dll not found"),
        ("protobuf-descriptors", "TypeError: Descriptors cannot be created directly."),
        ("libcuda-kernel-mismatch", "E cuda_diagnostics.cc:303] kernel version 384.90.0 does not match DSO "
                                    "version 384.111.0 -- cannot find working devices in this configuration"),
    ):
        assert _primary(text + "\n") == rid, rid


def test_the_audits_names_are_rules_now() -> None:
    """The names audit2 gave the causes no rule covered (and audit3 used) are rules, with their own logs here."""
    from tests.doctor.test_doctor_audit2 import NEW_RULE_NAMES_2
    assert NEW_RULE_NAMES_2 == NEW_RULES
    assert NEW_RULES <= {r.id for r in RULES.rules}
