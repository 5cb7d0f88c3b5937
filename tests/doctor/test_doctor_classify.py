"""Every rule against real log text: the shared cases and tests/fixtures/logs-extra (each with its source)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.conftest import FIXTURES, load_cases
from tfgpu_install.doctor.classify import CAUSE, HARMLESS_ONLY, UNKNOWN, classify
from tfgpu_install.doctor.rules import load_rules

RULES = load_rules()

# case id -> (rule expected as the primary cause, or None; status). Where we read a case differently
# from its `expected`, the comment says why.
SHARED: dict[str, tuple[str | None, str]] = {
    "case_029": ("cannot-dlopen-gpu-libs", CAUSE),  # TF 2.12 libs off the path; TF does not say which
    "case_031": ("missing-cuda-lib", CAUSE),  # libcudart.so.11.0 (+ note: a TF <= 2.10-era binary)
    "case_033": ("cudnn-runtime-older", CAUSE),  # 8.7.0 loaded, built with 8.9.4
    "case_035": ("gpu-memory-held", CAUSE),  # 190 MiB free of 7.92 GiB before TF started
    "case_037": ("cudart-stub-no-cuda", CAUSE),  # misleading "cuda drivers" message: libcudart, not the driver
    "case_039": ("no-kernel-image", CAUSE),  # A100 (8.0) with a CC <= 7.0 build
    "case_041": ("no-kernel-image", CAUSE),  # CC 5.0 not in TF 2.3.1's build
    "case_043": ("numpy2-abi", CAUSE),
    "case_045": (None, HARMLESS_ONLY),  # factory registration noise: must not be blamed
    # case_047: the excerpt holds only `pip freeze` and a device list that DOES show the GPU; the
    # failure (CUDA_ERROR_INVALID_HANDLE on the first Dense layer, per the issue title) is not in the
    # text. Naming "TF 2.20 lacks sm_120" from this text alone would be a guess, so doctor says "no
    # known cause" and its advice says a listed GPU is not proof (run a real matmul) - which is the
    # `expected.fix`. The error line itself is covered by rule kernel-load-failed (case_061).
    "case_047": (None, UNKNOWN),
    "case_049": ("ptxas-missing", CAUSE),  # no PTX compilation provider
    "case_051": ("ptxas-missing", CAUSE),  # can't find ptxas: driver JIT fallback
    # case_053: the thread's cause is WSL-preview specific; the text says only "insufficient driver".
    # The rule's cause/fix name the WSL2 case (Windows driver; no Linux driver inside WSL).
    "case_053": ("insufficient-driver", CAUSE),
    "case_055": ("cuda-visible-devices-empty", CAUSE),
    "case_057": ("libcuda-kernel-mismatch", CAUSE),  # libcuda 375.66 vs kernel module 384.130
    "case_059": ("container-no-gpu", CAUSE),  # hex host name + no /proc/driver/nvidia/version
    "case_061": ("ptx-too-new-for-driver", CAUSE),  # UNSUPPORTED_PTX_VERSION; INVALID_HANDLE is a symptom
    "case_063": ("missing-cuda-dll", CAUSE),  # native Windows, CUDA 11 DLLs missing
    "case_065": ("ptx-jit-jetson", CAUSE),  # CC 5.3 = Jetson: JetPack wheels, not x86 pip
}

# Words the cause or fix must contain for the case's `expected` to be reached.
MUST_SAY: dict[str, tuple[str, ...]] = {
    "case_029": ("tensorflow[and-cuda]", "TF_CPP_MAX_VLOG_LEVEL"),
    "case_031": ("libcudart.so.11.0", "CUDA 11"),
    "case_033": ("8.7.0", "8.9.4"),
    "case_035": ("--query-compute-apps",),
    "case_037": ("libcudart", "not that the driver is missing"),
    "case_041": ("tfgpu-install plan",),
    "case_043": ("numpy<2", "2.18"),
    "case_049": ("nvidia-cuda-nvcc-cu12",),
    "case_053": ("WSL", "never install a Linux driver"),
    "case_055": ("unset CUDA_VISIBLE_DEVICES",),
    "case_057": ("375.66", "384.130"),
    "case_059": ("--gpus all", "compat"),
    "case_061": ("driver",),
    "case_063": ("cublas64_11.dll", "WSL2"),
    "case_065": ("JetPack",),
}


def _extra() -> list[dict[str, Any]]:
    return [yaml.safe_load(p.read_text()) for p in sorted((FIXTURES / "logs-extra").glob("*.yaml"))]


@pytest.mark.parametrize("case", load_cases("logs"), ids=lambda c: c["id"])
def test_shared_log_reaches_expected_cause(case: dict[str, Any]) -> None:
    rule, status = SHARED[case["id"]]
    d = classify(case["verbatim"], RULES)
    assert d.status == status
    assert (d.primary.rule_id if d.primary else None) == rule
    if d.primary is not None:
        text = d.primary.cause + " " + d.primary.fix
        for word in MUST_SAY.get(case["id"], ()):
            assert word in text, f"{case['id']}: {word!r} missing from: {text}"
        assert d.primary.evidence and all(line.startswith("L") for line in d.primary.evidence)
        assert d.primary.source.startswith("https://")


def test_every_shared_case_is_mapped() -> None:
    assert {c["id"] for c in load_cases("logs")} == set(SHARED)


@pytest.mark.parametrize("case", _extra(), ids=lambda c: c["id"])
def test_extra_log_reaches_expected_cause(case: dict[str, Any]) -> None:
    assert case["source"].startswith("https://github.com/")
    d = classify(case["verbatim"], RULES)
    assert d.status == case["expected"]["status"]
    assert (d.primary.rule_id if d.primary else None) == case["expected"]["rule"]


def test_harmless_lines_are_never_blamed() -> None:
    harmless = {r.id for r in RULES.rules if r.harmless}
    for case in load_cases("logs") + _extra():
        d = classify(case["verbatim"], RULES)
        if d.primary is not None:
            assert d.primary.rule_id not in harmless
        assert all(f.rule_id in harmless for f in d.harmless)


def test_case_045_lists_the_noise_as_harmless() -> None:
    case = next(c for c in load_cases("logs") if c["id"] == "case_045")
    d = classify(case["verbatim"], RULES)
    assert {f.rule_id for f in d.harmless} >= {"factory-registration"}
    assert d.advice  # and still says where to look if something does fail


def test_nvidia_smi_failure_outputs_are_classified() -> None:
    """The recorded nvidia-smi failures (driver layer) reach the right cause too."""
    by_id = {c["id"]: c for c in load_cases("nvidia-smi")}
    nouveau, no_driver = (classify(by_id[c]["verbatim"], RULES).primary for c in ("case_021", "case_023"))
    assert nouveau is not None and nouveau.rule_id == "nouveau-loaded"
    assert no_driver is not None and no_driver.rule_id == "nvidia-smi-no-driver"
    healthy = classify(by_id["case_027"]["verbatim"], RULES)
    assert healthy.primary is None


def test_unknown_log_gets_no_known_cause_and_layer_advice() -> None:
    d = classify("Traceback (most recent call last):\n  File \"train.py\", line 3\nKeyError: 'label'\n", RULES)
    assert d.status == UNKNOWN and d.primary is None and not d.others
    assert len(d.advice) == len(RULES.layers)
    assert d.advice[0].startswith("1. NVIDIA driver") and "nvidia-smi" in d.advice[0]
    assert any("matmul" in a for a in d.advice)


def test_empty_log_is_unknown() -> None:
    assert classify("", RULES).status == UNKNOWN


def test_symptom_yields_to_its_cause() -> None:
    text = ("export CUDA_VISIBLE_DEVICES=\n"
            "E tensorflow/stream_executor/cuda/cuda_driver.cc:318] failed call to cuInit: CUDA_ERROR_NO_DEVICE\n")
    d = classify(text, RULES)
    assert d.primary is not None and d.primary.rule_id == "cuda-visible-devices-empty"
    assert "cuinit-no-device" in {f.rule_id for f in d.others}


def test_bottom_layer_wins() -> None:
    """Causes are ordered bottom-up: a broken driver is named before an import-time numpy error."""
    text = ("Failed to initialize NVML: Driver/library version mismatch\n"
            "A module that was compiled using NumPy 1.x cannot be run in\nNumPy 2.0.1 as it may crash.\n")
    d = classify(text, RULES)
    assert d.primary is not None and d.primary.rule_id == "driver-library-mismatch"
    assert [f.rule_id for f in d.others] == ["numpy2-abi"]


def test_named_groups_fill_the_cause() -> None:
    d = classify("Could not load dynamic library 'libcublas.so.12'; dlerror: libcublas.so.12: cannot open "
                 "shared object file: No such file or directory", RULES)
    assert d.primary is not None
    assert "libcublas.so.12" in d.primary.cause and "CUDA 12" in d.primary.cause and "?" not in d.primary.cause


def test_tf216_needs_the_version_in_the_text() -> None:
    line = "W gpu_device.cc:2343] Cannot dlopen some GPU libraries. Please make sure the missing libraries ..."
    assert classify(line, RULES).primary.rule_id == "cannot-dlopen-gpu-libs"  # type: ignore[union-attr]
    d = classify("$ pip show tensorflow\nName: tensorflow\nVersion: 2.16.1\n" + line, RULES)
    assert d.primary is not None and d.primary.rule_id == "tf216-pip-libs-off-path"
    d = classify("tensorflow==2.16.1\n" + line, RULES)
    assert d.primary is not None and d.primary.rule_id == "tf216-pip-libs-off-path"


def test_sudo_needs_sudo_in_the_text() -> None:
    log = ("$ sudo python3 train.py\n2024-01-02 10:00:00.000000: W tensorflow/core/common_runtime/gpu/"
           "gpu_device.cc:2256] Cannot dlopen some GPU libraries.\n")
    d = classify(log, RULES)
    assert d.primary is not None and d.primary.rule_id == "sudo-strips-ld-library-path"
    assert "sudo env LD_LIBRARY_PATH" in d.primary.fix


# Rules no public log we could find exercises verbatim yet; each is exercised above with the real
# message text embedded in a minimal log, and listed here so a new rule cannot slip in untested.
NO_REAL_LOG_YET = {
    "tf216-pip-libs-off-path": "tensorflow/tensorflow#63362's stored excerpt stops before the log",
    "sudo-strips-ld-library-path": "no stored thread shows a sudo prompt with the loader failure",
    "nvidia-smi-not-found": "shell message, not a TF log",
    "input-bound": "profiler text; no stored thread",
    "gpu-oom": "covered as a secondary finding of case_035",
}


def test_every_rule_is_exercised_by_real_text() -> None:
    seen: set[str] = set()
    held = [yaml.safe_load(p.read_text()) for p in sorted((FIXTURES / "logs-held").glob("*.yaml"))]
    kinds = [yaml.safe_load(p.read_text()) for p in sorted((FIXTURES / "logs-kinds").glob("*.yaml"))]
    wild = [yaml.safe_load(p.read_text()) for p in sorted((FIXTURES / "logs-wild").glob("*.yaml"))]
    wild = [c for c in wild if c["split"] == "tune"]  # the held-out half is read by test_doctor_wild only
    texts = [c["verbatim"] for c in load_cases("logs") + load_cases("nvidia-smi") + _extra() + held + kinds + wild]
    for t in texts:
        d = classify(t, RULES)
        seen |= {f.rule_id for f in (d.primary,) + d.others + d.harmless if f is not None}
    missing = {r.id for r in RULES.rules} - seen - set(NO_REAL_LOG_YET)
    assert not missing, f"rules without a real log: {sorted(missing)}"


def _corpus() -> list[dict[str, Any]]:
    return load_cases("logs") + _extra()


def _reaches_expected(case: dict[str, Any]) -> bool:
    d = classify(case["verbatim"], RULES)
    if case["id"] in SHARED:
        rule, status = SHARED[case["id"]]
    else:
        rule, status = case["expected"]["rule"], case["expected"]["status"]
    return d.status == status and (d.primary.rule_id if d.primary else None) == rule


def test_share_of_real_logs_classified_right() -> None:
    """Issue 12: at least 95% of the real logs (shared + our finds) reach their expected cause."""
    corpus = _corpus()
    right = [c["id"] for c in corpus if _reaches_expected(c)]
    share = len(right) / len(corpus)
    print(f"real logs classified right: {len(right)}/{len(corpus)} = {share:.1%}")
    assert len(corpus) >= 45 and share >= 0.95, sorted({c["id"] for c in corpus} - set(right))


@pytest.mark.parametrize("rule_id", ["ngc-container-no-driver", "illegal-instruction-avx", "libcuda-stub-loaded",
                                     "tensorflow-gpu-removed", "cuinit-no-device-wsl"])
def test_each_new_category_has_a_real_log(rule_id: str) -> None:
    hits = [c["id"] for c in _extra() if c["expected"]["rule"] == rule_id and _reaches_expected(c)]
    assert hits, f"no real log reaches {rule_id}"
    rule = RULES.by_id(rule_id)
    assert rule.fix and rule.source.startswith("https://")


def test_wsl2_is_among_the_causes_of_no_device() -> None:
    d = classify("E cuda_driver.cc:282] failed call to cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is "
                 "detected\n",
                 RULES)
    assert d.primary is not None and d.primary.rule_id == "cuinit-no-device"
    assert "WSL2" in d.primary.cause and "/dev/dxg" in d.primary.fix


def test_required_literal_is_in_every_match() -> None:
    """The literal shortcut may only skip scans that could not match: check it on every real text."""
    from tfgpu_install.doctor.rules import required_literal

    texts = [c["verbatim"] for c in _corpus() + load_cases("nvidia-smi")]
    for rule in RULES.rules:
        for pat in rule.patterns + rule.requires + rule.evidence:
            lit = required_literal(pat)
            for t in texts:
                for m in pat.finditer(t):
                    assert lit in m.group(0), (rule.id, pat.pattern, lit)


def test_fifty_megabyte_log_names_its_cause(tmp_path: Any) -> None:
    """A 50 MB training log (real noise lines repeated) with one real failure line in the middle:
    the cause is still found (issue 12: this took minutes; measured now: see the README)."""
    noise = "\n".join(c["verbatim"] for c in load_cases("logs") if c["id"] == "case_045")
    noise += "\nEpoch 3/100\n1875/1875 [==============================] - 5s 3ms/step - loss: 0.0312\n"
    half = noise * (25_000_000 // len(noise) + 1)
    text = half + "Free memory: 190.69MiB\n" + (
        "E tensorflow/stream_executor/cuda/cuda_driver.cc:890] failed to allocate 7.92G (8502706176 bytes) "
        "from device: CUDA_ERROR_OUT_OF_MEMORY: out of memory\n") + half
    assert len(text) >= 50_000_000
    d = classify(text, RULES)
    assert d.primary is not None and d.primary.rule_id == "gpu-memory-held"
    assert any("CUDA_ERROR_OUT_OF_MEMORY" in e for e in d.primary.evidence)
    assert {f.rule_id for f in d.harmless} >= {"factory-registration"}
