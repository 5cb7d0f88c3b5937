"""The resolver's rules, on machines built in code and a hand-copied excerpt of the real tables."""

from __future__ import annotations

from dataclasses import replace
from datetime import date

import pytest
from support.shapes import gpu, gpus_named, machine, mini_knowledge, mini_releases, policy, release

from tfgpu_install.knowledge.model import Defect
from tfgpu_install.resolver.resolve import (
    candidates,
    gpu_coverage,
    has_usable_gpu,
    max_cuda_from_table,
    min_driver_for,
    required_cuda,
    resolve,
    version_key,
)

KN = mini_knowledge()
LATEST = policy("latest")


def rejected_map(res):  # type: ignore[no-untyped-def]
    return {r.tensorflow: r.reasons for r in res.rejected}


# --- helpers ---------------------------------------------------------------------------


def test_version_key_tolerates_driver_and_cc_spellings() -> None:
    assert version_key("535.104.05") == (535, 104, 5)
    assert version_key("9.0a") == (9, 0)
    assert version_key("ERR!") == ()
    assert version_key("570.26") > version_key("570.124.06")[:1]


@pytest.mark.parametrize(
    "cc, sass, ptx, expected",
    [
        ("8.6", ("8.0",), (), ("sass", "8.0")),  # same major, lower minor: binary compatible
        ("8.9", ("8.0", "8.6"), (), ("sass", "8.6")),  # the highest one at or below
        ("8.0", ("8.6",), (), ("none", None)),  # SASS never runs on a lower minor
        ("9.0", ("8.0", "8.9"), (), ("none", None)),  # SASS never crosses a major
        ("9.0", ("8.0",), ("9.0",), ("ptx", "9.0")),
        ("12.0", ("8.0", "8.9"), ("9.0",), ("ptx", "9.0")),  # Blackwell: PTX only
        ("3.0", ("3.5",), ("3.5",), ("none", None)),  # PTX never runs below itself
        ("7.5", ("7.0",), ("8.0",), ("sass", "7.0")),
    ],
)
def test_gpu_coverage(cc: str, sass: tuple[str, ...], ptx: tuple[str, ...], expected: tuple[str, object]) -> None:
    r = release("9.9.9", ("3.11",), "12.3", "8.9", sass, ptx)
    assert gpu_coverage(cc, r) == expected


def test_required_cuda_uses_the_newer_of_build_and_pinned_runtime() -> None:
    r = release("2.99.0", ("3.11",), "12.3", "8.9", (), (), pins={"nvidia-cuda-runtime-cu12": "12.4.127",
                                                               "nvidia-cublas-cu12": "12.9.1.4"})
    assert required_cuda(r) == "12.4"  # cuBLAS's own version number is not a CUDA version
    assert required_cuda(replace(r, cuda_from="system")) == "12.3"


def test_driver_table_lookups() -> None:
    assert max_cuda_from_table(KN.drivers, "535.104.05").cuda == "12.2"  # type: ignore[union-attr]
    assert max_cuda_from_table(KN.drivers, "331.62") is None
    assert min_driver_for(KN.drivers, "12.5").min_driver == "555.42.02"  # type: ignore[union-attr]


# --- the walk, the choice and its explanation --------------------------------------------


def test_k80_on_470_picks_cuda_11_2_with_sass_and_offers_minor_compat() -> None:
    res = resolve(machine("470.182.03", gpus_named("Tesla K80")), KN, LATEST)
    assert res.choice is not None
    assert (res.choice.tensorflow, res.choice.cuda, res.choice.jit_only) == ("2.11.1", "11.2", False)
    assert any("driver 470.182.03 (nvidia-smi) supports CUDA <= 11.4 (table:drivers.yaml" in r for r in res.reasons)
    assert any("sm_35 SASS" in r for r in res.reasons)
    rej = rejected_map(res)
    # every higher-ranked candidate, each with every constraint that rejected it
    assert list(rej) == ["2.21.0", "2.20.0", "2.18.0", "2.17.1", "2.16.1", "2.15.1", "2.15.0", "2.14.1"]
    assert len(rej["2.17.1"]) == 2 and "no SASS or PTX <= 3.7 in TF 2.17.1" in rej["2.17.1"][1]
    assert any("known defect tensorrt-pins" in r for r in rej["2.15.0"])
    assert rej["2.14.1"] == (rej["2.14.1"][0],) and "needs CUDA 11.8" in rej["2.14.1"][0]
    assert any(o.startswith("TF 2.14.1 (CUDA 11.8) would run on driver 470.182.03 through CUDA minor-version "
                            "compatibility (11.x >= 450.80.02") and "--allow-minor-compat" in o for o in res.options)


def test_minor_compat_is_chosen_only_when_asked() -> None:
    facts = machine("525.85.12", gpus_named("Tesla T4"))
    plain = resolve(facts, KN, LATEST)
    assert plain.choice is not None and plain.choice.tensorflow == "2.14.1"
    assert any("TF 2.21.0 (CUDA 12.5) would run on driver 525.85.12" in o for o in plain.options)
    accepted = resolve(facts, KN, LATEST, allow_minor_compat=True)
    assert accepted.choice is not None and accepted.choice.tensorflow == "2.21.0"
    assert any("accepted (--allow-minor-compat)" in r for r in accepted.reasons)


def test_minor_compat_is_not_offered_when_a_gpu_needs_ptx_jit() -> None:
    res = resolve(machine("550.54.14", gpus_named("NVIDIA H100 80GB HBM3"), pythons=("3.12.1",)), KN, LATEST)
    assert res.choice is not None and res.choice.tensorflow == "2.17.1"
    assert res.choice.jit_only is True
    assert not any("minor-version" in o for o in res.options)  # H100 needs JIT, which that mode lacks
    assert any("JIT-compiles on first run" in w for w in res.warnings)


def test_blackwell_is_never_offered_a_release_known_to_fail_there() -> None:
    # Was: TF 2.21.0 chosen as "JIT only" on an RTX 5090 (issue #40: by public reports it fails at the first op).
    res = resolve(machine("575.51.03", gpus_named("NVIDIA GeForce RTX 5090"), pythons=("3.12.3",)), KN, LATEST)
    assert res.choice is None
    why = rejected_map(res)["2.21.0"]
    assert any("known failure blackwell-ptx-jit (reported)" in w and "issues/101746" in w and "issues/111958" in w
               for w in why)
    assert any("what runs there" in r and "knowledge update" in r and "ngc" in r.lower() for r in res.remedies)
    assert not any("no prebuilt TensorFlow GPU release" in r for r in res.remedies)


def test_blackwell_named_release_installs_with_the_failure_as_a_warning_never_jit_only() -> None:
    named = policy("latest", tensorflow="==2.21.0", explicit=True)
    res = resolve(machine("575.51.03", gpus_named("NVIDIA GeForce RTX 5090"), pythons=("3.12.3",)), KN, named)
    assert res.choice is not None and res.choice.tensorflow == "2.21.0" and not res.choice.jit_only
    assert any("known failure blackwell-ptx-jit" in w and "expect it to fail" in w for w in res.warnings)
    assert not any("JIT-compiles" in w for w in res.warnings)


def test_a_release_with_sass_for_the_gpu_is_not_held_to_the_failure() -> None:
    fixed = replace(KN.releases[0], sass=(*KN.releases[0].sass, "12.0"))
    res = resolve(machine("575.51.03", gpus_named("NVIDIA GeForce RTX 5090"), pythons=("3.12.3",)),
                  replace(KN, releases=(fixed, *KN.releases[1:])), LATEST)
    assert res.choice is not None and res.choice.tensorflow == fixed.tensorflow and not res.choice.jit_only


def test_older_release_with_sass_is_offered_when_the_choice_is_jit_only() -> None:
    kn = mini_knowledge([r for r in mini_releases() if r.tensorflow in ("2.15.1", "2.14.1")])
    a100_sass = replace(kn.releases[1], sass=(*kn.releases[1].sass, "8.0"))
    kn = replace(kn, releases=(replace(kn.releases[0], sass=("7.0",), ptx=("8.0",)), a100_sass))
    res = resolve(machine("535.104.05", gpus_named("NVIDIA A100-SXM4-40GB")), kn, LATEST)
    assert res.choice is not None and res.choice.tensorflow == "2.15.1" and res.choice.jit_only
    assert any("TF 2.14.1 has SASS for every GPU here (no JIT)" in o for o in res.options)


def test_mixed_gpus_reason_per_device_and_offer_visible_devices() -> None:
    facts = machine("570.124.06", gpus_named("GeForce GTX 970", "NVIDIA GeForce RTX 4090"))
    res = resolve(facts, KN, LATEST)
    assert res.choice is not None and res.choice.tensorflow == "2.17.1" and res.choice.visible_devices is None
    assert any(r.startswith("GPU 0 (GeForce GTX 970, cc 5.2") for r in res.reasons)
    assert any(r.startswith("GPU 1 (NVIDIA GeForce RTX 4090, cc 8.9") for r in res.reasons)
    rej = rejected_map(res)
    assert rej["2.21.0"] == (
        "GPU 0 (GeForce GTX 970, cc 5.2 from nvidia-smi --query-gpu): no SASS or PTX <= 5.2 in TF 2.21.0 "
        "(SASS: 6.0, 7.0, 8.0, 8.9; PTX: 9.0; https://www.tensorflow.org/install/source#gpu)",
    )
    assert any("TF 2.21.0 would run on GPU 1 alone with CUDA_VISIBLE_DEVICES=1" in o for o in res.options)
    restricted = resolve(facts, KN, LATEST, restrict_gpus=True)
    assert restricted.choice is not None
    assert (restricted.choice.tensorflow, restricted.choice.visible_devices) == ("2.21.0", "1")


def test_cuda_visible_devices_limits_the_gpus_considered() -> None:
    facts = machine("570.124.06", gpus_named("GeForce GTX 970", "NVIDIA GeForce RTX 4090"), cuda_visible_devices="1")
    res = resolve(facts, KN, LATEST)
    assert res.choice is not None and res.choice.tensorflow == "2.21.0"
    assert any("CUDA_VISIBLE_DEVICES=1 (environment): considering GPU 1" in r for r in res.reasons)
    hidden = replace(facts, cuda_visible_devices="-1")
    assert not has_usable_gpu(hidden)
    res = resolve(hidden, KN, LATEST)
    assert res.choice is None and any("unset CUDA_VISIBLE_DEVICES" in r for r in res.remedies)


def test_blocking_defect_rejects_unless_the_policy_allows_defects() -> None:
    kn = mini_knowledge([r for r in mini_releases() if r.tensorflow in ("2.15.0", "2.14.1")])
    facts = machine("535.104.05", gpus_named("NVIDIA A100-SXM4-40GB"))
    res = resolve(facts, kn, LATEST)
    assert res.choice is not None and res.choice.tensorflow == "2.14.1"
    assert rejected_map(res)["2.15.0"] == (
        "TF 2.15.0: known defect tensorrt-pins: the and-cuda extra pins TensorRT wheels that cannot be installed "
        "(https://github.com/tensorflow/tensorflow/issues/62075)",
    )
    allowing = resolve(facts, kn, policy("mine", allow_defects=True))
    assert allowing.choice is not None and allowing.choice.tensorflow == "2.15.0"


def test_non_blocking_defects_and_unconfirmed_fields_become_warnings() -> None:
    kn = mini_knowledge([replace(r, unconfirmed=("sass",)) for r in mini_releases() if r.tensorflow == "2.16.1"])
    res = resolve(machine("550.54.14", gpus_named("NVIDIA GeForce RTX 4090")), kn, LATEST)
    assert res.choice is not None
    assert any("the installer handles it: activation sets LD_LIBRARY_PATH" in w for w in res.warnings)
    assert any("not confirmed from a source: sass" in w for w in res.warnings)


def test_python_prefers_the_newest_one_here_then_conda() -> None:
    facts = machine("550.54.14", gpus_named("NVIDIA GeForce RTX 4090"), pythons=("3.8.10", "3.10.12", "3.11.9"))
    res = resolve(facts, KN, LATEST)
    assert res.choice is not None and res.choice.tensorflow == "2.17.1"
    assert (res.choice.python, res.choice.python_path) == ("3.11", "/usr/bin/python3.11")
    old_only = machine("550.54.14", gpus_named("NVIDIA GeForce RTX 4090"), pythons=("3.8.10",))
    res = resolve(old_only, KN, LATEST)
    assert res.choice is not None and res.choice.tensorflow == "2.11.1"  # the newest with Python 3.8
    assert "3.8" in rejected_map(res)["2.17.1"][-1]
    res = resolve(replace(old_only, tools=replace(old_only.tools, conda="/opt/conda/bin/conda")), KN, LATEST)
    assert res.choice is not None and res.choice.tensorflow == "2.17.1"
    assert (res.choice.python, res.choice.python_path) == ("3.12", None)
    assert any("conda (/opt/conda/bin/conda) will provide Python 3.12" in r for r in res.reasons)
    assert resolve(old_only, KN, LATEST, conda_available=True).choice.python_path is None  # type: ignore[union-attr]


def test_no_python_fits_gives_a_python_remedy() -> None:
    kn = mini_knowledge([r for r in mini_releases() if r.tensorflow in ("2.21.0", "2.20.0")])
    res = resolve(machine("570.124.06", gpus_named("NVIDIA GeForce RTX 4090"), pythons=("3.8.10",)), kn, LATEST)
    assert res.choice is None
    assert any(r.startswith("install Python 3.13 (TF 2.21.0 supports 3.10-3.13)") for r in res.remedies)


def test_glibc_is_a_hard_constraint_and_unknown_glibc_is_not_guessed() -> None:
    facts = machine("570.124.06", gpus_named("NVIDIA GeForce RTX 4090"), glibc="2.17")
    res = resolve(facts, KN, LATEST)
    assert res.choice is not None and res.choice.tensorflow == "2.18.0"
    assert "needs glibc >= 2.27; this machine has 2.17" in rejected_map(res)["2.21.0"][0]
    unknown = resolve(replace(facts, host=replace(facts.host, glibc=None)), KN, LATEST)
    assert unknown.choice is not None and unknown.choice.tensorflow == "2.21.0"


def test_arch_mismatch_rejects_every_release() -> None:
    res = resolve(machine("570.124.06", gpus_named("NVIDIA GeForce RTX 4090"), arch="aarch64"), KN, LATEST)
    assert res.choice is None
    assert len(res.rejected) == len(KN.releases)  # every release rejected, each for its arch
    assert all(any("no aarch64 wheel" in t for t in r.reasons) for r in res.rejected)


def test_native_windows_only_up_to_2_10_and_wsl2_offered() -> None:
    facts = machine("572.16", gpus_named("NVIDIA GeForce RTX 3090"), os_id="windows", glibc=None)
    res = resolve(facts, KN, LATEST)
    assert res.choice is not None and res.choice.tensorflow == "2.10.1"
    assert "native-Windows GPU build" in rejected_map(res)["2.11.1"][0]
    assert any("WSL2" in o and "TF 2.21.0" in o for o in res.options)


def test_no_gpu_without_allow_cpu_has_no_choice_and_says_how_on() -> None:
    res = resolve(machine(None), KN, LATEST)
    assert res.choice is None and not res.cpu_only
    assert any("no NVIDIA GPU found" in r for r in res.reasons)
    assert any("--allow-cpu" in r for r in res.remedies)


def test_no_gpu_with_allow_cpu_resolves_for_the_cpu() -> None:
    res = resolve(machine(None, pythons=("3.11.4",)), KN, LATEST, allow_cpu=True)
    assert res.cpu_only and res.choice is not None
    assert res.choice.tensorflow == "2.21.0" and res.choice.jit_only is False
    assert "no NVIDIA GPU: resolving for CPU verification (--allow-cpu); GPU constraints not applied" in res.reasons


def test_gpu_without_driver_names_the_driver_to_install() -> None:
    facts = machine(None, gpus_named("NVIDIA GeForce RTX 4090"))
    res = resolve(facts, KN, LATEST)
    assert res.choice is None
    assert "an NVIDIA GPU is present but no NVIDIA driver answered" in res.reasons
    assert any(r.startswith("install NVIDIA driver >= 555.42.02 (CUDA 12.5") and "TF 2.21.0" in r for r in res.remedies)
    unloaded = resolve(machine("535.104.05", gpus_named("NVIDIA GeForce RTX 4090"), loaded=False), KN, LATEST)
    assert unloaded.choice is None and any("installed but not loaded" in r for r in unloaded.reasons)


def test_old_driver_and_old_gpu_nothing_fits_with_remedies() -> None:
    res = resolve(machine("331.62", gpus_named("GeForce GTX 680")), KN, LATEST)
    assert res.choice is None
    assert len(res.rejected) == len(KN.releases)
    assert all(any("older than every CUDA release" in t for t in r.reasons) for r in res.rejected)
    assert any("GPU 0 (GeForce GTX 680, cc 3.0" in r and "build TensorFlow from source" in r for r in res.remedies)
    assert any(r.startswith("CPU-only TensorFlow: pip install tensorflow==2.21.0") for r in res.remedies)


def test_a_fermi_gpu_is_not_told_to_build_tensorflow_from_source() -> None:
    """cc 2.x: no TensorFlow ever ran there, so the remedy says so instead of suggesting a source build."""
    res = resolve(machine("390.157", (gpu("GeForce GTX 580", "2.0"),)), KN, LATEST)
    assert res.choice is None
    fermi = [r for r in res.remedies if "GeForce GTX 580" in r]
    assert fermi and all("build TensorFlow from source" not in r for r in fermi)
    assert any("no TensorFlow release, prebuilt or built from source, runs on it" in r for r in fermi)


def test_driver_too_old_for_a_fine_gpu_names_the_minimum_driver() -> None:
    res = resolve(machine("384.66", gpus_named("GeForce GTX 1080 Ti"), pythons=("3.11.4",)), KN, LATEST)
    assert res.choice is None
    assert any(r.startswith("install NVIDIA driver >= 555.42.02 (CUDA 12.5") for r in res.remedies)


def test_unknown_compute_capability_is_looked_up_or_flagged_not_guessed() -> None:
    res = resolve(machine("550.54.14", [gpu("NVIDIA GeForce RTX 4090", None)]), KN, LATEST)
    assert any("cc 8.9 from table:gpus.yaml" in r for r in res.reasons)
    res = resolve(machine("550.54.14", [gpu("Mystery GPU", None)]), KN, LATEST)
    assert res.choice is not None
    assert any("compute capability unknown; not checked" in r for r in res.reasons)


def test_mig_warning() -> None:
    res = resolve(machine("535.104.05", [gpu("NVIDIA A100-SXM4-40GB", "8.0", mig=True)]), KN, LATEST)
    assert any("MIG" in w for w in res.warnings)


def test_policy_can_refuse_jit_only_gpus() -> None:
    strict = policy("strict", jit_only_ok=False)
    res = resolve(machine("550.54.14", gpus_named("NVIDIA H100 80GB HBM3")), KN, strict)
    assert res.choice is None
    assert any("does not accept JIT-only" in t for t in rejected_map(res)["2.17.1"])


# --- policies ------------------------------------------------------------------------------


def test_stable_policy_waits_for_a_patch_release_and_age() -> None:
    stable = policy("stable", require_patch_release=True, min_age_days=60)
    kept, left = candidates(KN, stable, today=date(2026, 3, 20))
    assert "2.21.0" not in [r.tensorflow for r in kept]
    assert left == ["2.21.0: an x.y.0 release with no patch release or newer line yet, 19 days old (< 60)"]
    assert "2.20.0" in [r.tensorflow for r in kept]  # a newer line exists
    settled, left = candidates(KN, stable, today=date(2026, 6, 1))  # old enough now
    assert settled[0].tensorflow == "2.21.0" and not left
    young = candidates(KN, policy("s", min_age_days=60), today=date(2026, 3, 20))[1]
    assert young == ["2.21.0: released 2026-03-01, younger than the profile's 60 days"]


def test_policy_range_order_and_cuda_source_filters() -> None:
    legacy = policy("legacy", tensorflow="<2.12", prefer="newest")
    kept, _ = candidates(KN, legacy)
    assert [r.tensorflow for r in kept] == ["2.11.1", "2.10.1", "2.3.0"]
    oldest = candidates(KN, policy("o", prefer="oldest"))[0]
    assert oldest[0].tensorflow == "2.3.0"
    pip_only = candidates(KN, policy("p", cuda_from=("pip",)))[0]
    assert pip_only and all(r.cuda_from == "pip" for r in pip_only)
    assert len(pip_only) < len(KN.releases)  # the filter removed the others


def test_empty_policy_answers_without_raising() -> None:
    res = resolve(machine("550.54.14", gpus_named("NVIDIA GeForce RTX 4090")), KN, policy("none", tensorflow="<1"))
    assert res.choice is None and any("keeps no release" in r for r in res.reasons)


def test_choice_carries_release_pins_and_package() -> None:
    kn = mini_knowledge([replace(mini_releases()[3], constraints={"numpy": "<2"})])
    res = resolve(machine("550.54.14", gpus_named("NVIDIA GeForce RTX 4090")), kn, LATEST)
    c = res.choice
    assert c is not None
    assert c.pins == {"nvidia-cuda-runtime-cu12": "12.3.101", "nvidia-cudnn-cu12": "8.9.7.29"}
    assert c.requirements()[0] == "tensorflow==2.17.1" and "numpy<2" in c.requirements()
    assert (c.cuda_from, c.cudnn) == ("pip", "8.9")
    assert res.to_json()["choice"]["tensorflow"] == "2.17.1"


def test_defect_blocks_only_gpu_installs() -> None:
    rel = replace(mini_releases()[0], defects=(Defect("x", "broken on GPUs", "src", blocks=True),))
    res = resolve(machine(None, pythons=("3.12.1",)), mini_knowledge([rel]), LATEST, allow_cpu=True)
    assert res.choice is not None and res.cpu_only


def test_wsl2_driver_is_the_windows_one() -> None:
    facts = machine("546.80", gpus_named("NVIDIA GeForce RTX 3090"), wsl=True)
    res = resolve(facts, KN, LATEST)
    assert res.choice is not None and res.choice.cuda == "12.3"
    assert any(r.startswith("WSL2: driver 546.80 is the Windows host driver") for r in res.reasons)
    old = resolve(machine("456.71", gpus_named("NVIDIA GeForce RTX 3090"), wsl=True, pythons=("3.11.4",)), KN, LATEST)
    assert old.choice is None
    assert any("on the Windows host (never install a Linux driver inside WSL2)" in r for r in old.remedies)


def test_rejection_summary_groups_gpus_that_fail_alike() -> None:
    res = resolve(machine("331.62", gpus_named("GeForce GTX 680", "GeForce GTX 680")), KN, LATEST)
    assert res.rejected[0].summary == "driver older than any CUDA; GPU 0, 1 cc 3.0: no kernels"
    res = resolve(machine("418.87.01", gpus_named("GeForce GTX 680", "Tesla K80")), KN, LATEST)
    assert res.rejected[0].summary == "CUDA 12.5 > driver's 10.1; GPU 0 cc 3.0: no kernels; GPU 1 cc 3.7: no kernels"
