"""Old and new GPUs on the real tables (profiles/): the CUDA 11 user space, native kernels through
minor-version compatibility first, driver ceilings per architecture, Blackwell's ptxas (issue 11)."""

from __future__ import annotations

from support.shapes import gpu, machine, policy

from tfgpu_install.knowledge.load import load_knowledge
from tfgpu_install.knowledge.model import Knowledge
from tfgpu_install.resolver.hardware import dropped_by_driver, ptxas_for, ptxas_knows
from tfgpu_install.resolver.resolve import resolve

STABLE = policy("stable", require_patch_release=True, min_age_days=90)
_KN: list[Knowledge] = []


def kn() -> Knowledge:
    if not _KN:
        _KN.append(load_knowledge())
    return _KN[0]


def test_k80_on_470_gets_tf_2_11_with_the_cu11_wheels_and_minor_compat_said() -> None:
    res = resolve(machine("470.82.01", [gpu("Tesla K80", "3.7")]), kn(), STABLE)
    c = res.choice
    assert c is not None and (c.tensorflow, c.cuda, c.cuda_from, c.jit_only) == ("2.11.1", "11.2", "pip", False)
    assert c.pins["nvidia-cudnn-cu11"] == "8.9.6.50" and c.pins["nvidia-cusolver-cu11"] == "11.4.1.48"
    assert set(c.hashes) == set(c.pins) and all(h[0].startswith("sha256:") for h in c.hashes.values())
    said = " ".join(res.reasons)
    assert "nvidia-*-cu11 wheels" in said
    assert ("the CUDA 11.8 wheels run the CUDA 11.2 build through CUDA minor-version compatibility "
            "(11.x on >= 450.80.02") in said
    assert "requirements" not in said and c.requirements()[1:3] == ["nvidia-cublas-cu11==11.11.3.6",
                                                                    "nvidia-cuda-cupti-cu11==11.8.87"]


def test_a_driver_that_runs_cuda_11_8_says_nothing_about_minor_compat() -> None:
    res = resolve(machine("520.61.05", [gpu("Tesla P100-PCIE-16GB", "6.0")]), kn(), STABLE,
                  )
    assert res.choice is not None and res.choice.tensorflow == "2.14.1"
    older = resolve(machine("520.61.05", [gpu("Tesla P100-PCIE-16GB", "6.0")]),
                    kn(), policy("old", tensorflow="==2.12.*")).choice
    assert older is not None and older.cuda_from == "pip" and older.pins["nvidia-cuda-runtime-cu11"] == "11.8.89"
    res12 = resolve(machine("520.61.05", [gpu("Tesla P100-PCIE-16GB", "6.0")]), kn(),
                    policy("old", tensorflow="==2.12.*"))
    assert not any("minor-version compatibility" in r for r in res12.reasons)


def test_kepler_on_a_driver_past_r470_is_not_usable() -> None:
    res = resolve(machine("520.61.05", [gpu("Tesla K80", "3.7")]), kn(), STABLE)
    assert res.choice is None and any("newer than R470" in r for r in res.reasons)


def test_tf_2_4_and_cuda_10_keep_the_system_path_with_the_sonames_tf_asks_for() -> None:
    r24 = kn().release("2.4.4")
    r23 = kn().release("2.3.4")
    assert r24 is not None and r23 is not None
    assert (r24.cuda_from, r24.pins) == ("system", {}) and "libcusolver.so.10" in r24.sonames
    assert "no nvidia-*-cu11 wheel ships libcusolver.so.10" in r24.sources["sonames"]
    assert r23.sonames[0] == "libcudart.so.10.1" and "libcudnn.so.7" in r23.sonames


def test_h100_on_525_gets_native_kernels_through_minor_version_compatibility() -> None:
    m = machine("525.60.13", [gpu("NVIDIA H100 80GB HBM3", "9.0")], pythons=("3.11.9",))
    res = resolve(m, kn(), STABLE)
    c = res.choice
    assert c is not None and not c.jit_only
    assert tuple(int(x) for x in c.tensorflow.split(".")[:2]) >= (2, 15)
    why = res.reasons[-1]
    assert "has only PTX for GPU 0" in why and "minor-version compatibility" in why and "--strict-driver" in why
    assert c.tensorflow not in {r.tensorflow for r in res.rejected}
    assert not any("JIT-compiles" in w for w in res.warnings)


def test_strict_driver_keeps_the_jit_only_pick_and_offers_the_native_one() -> None:
    m = machine("525.60.13", [gpu("NVIDIA H100 80GB HBM3", "9.0")], pythons=("3.11.9",))
    res = resolve(m, kn(), STABLE, strict_driver=True)
    assert res.choice is not None and res.choice.tensorflow == "2.14.1" and res.choice.jit_only
    assert any("--allow-minor-compat" in o for o in res.options)


def test_a_strict_pick_with_native_kernels_is_kept() -> None:
    res = resolve(machine("525.60.13", [gpu("NVIDIA A100-SXM4-80GB", "8.0")], pythons=("3.11.9",)), kn(), STABLE)
    assert res.choice is not None and res.choice.tensorflow == "2.14.1" and not res.choice.jit_only
    assert not any("--strict-driver" in r for r in res.reasons)


def test_k80_and_rtx_4090_on_550_the_k80_is_unsupported_by_that_driver() -> None:
    m = machine("550.54.14", [gpu("Tesla K80", "3.7", 0), gpu("NVIDIA GeForce RTX 4090", "8.9", 1)])
    res = resolve(m, kn(), STABLE)
    assert any("GPU 0 (Tesla K80" in r and "is Kepler: driver 550.54.14 is newer than R470" in r
               and "unsupported by that driver" in r and "--restrict-gpus" in r for r in res.reasons)
    assert any("leaving out GPU 0" in o and "which this driver no longer supports" in o and "--restrict-gpus" in o
               for o in res.options)
    assert all(any("unsupported by driver 550.54.14" in why or "R470" in why for why in rej.reasons)
               for rej in res.rejected)
    picked = resolve(m, kn(), STABLE, restrict_gpus=True).choice
    assert picked is not None and picked.visible_devices == "1"


def test_driver_ceilings_are_sourced_data() -> None:
    rows = kn().architectures
    assert {(r.architecture, r.last_branch) for r in rows} >= {("Kepler", 470), ("Maxwell", 580), ("Pascal", 580),
                                                               ("Volta", 580)}
    assert all(r.source.startswith(("NVIDIA", "http")) for r in rows)
    assert dropped_by_driver(rows, "3.7", "470.256.02") is None  # R470 still drives Kepler
    assert dropped_by_driver(rows, "6.1", "580.65.06") is None and dropped_by_driver(rows, "6.1", "590.44.01")
    assert dropped_by_driver(rows, "8.9", "590.44.01") is None  # Ada is not in the table: never dropped


def test_ptxas_table() -> None:
    rows = kn().ptxas
    assert ptxas_knows(rows, "12.5", "9.0") is True and ptxas_knows(rows, "12.5", "12.0") is False
    assert ptxas_knows(rows, "12.8", "12.0") is True and ptxas_knows(rows, "11.2", "8.0") is None
    row = ptxas_for(rows, "12.0")
    assert row is not None and row.ptxas == "12.8" and "12.8" in row.source


def with_a_2_22() -> Knowledge:
    """The real tables plus a 2.22-shaped release (2.21's wheel facts: SASS up to 9.0, compute_90 PTX),
    which the Blackwell known failures (TF <= 2.21) do not hold for: its PTX path is the one a GPU uses."""
    from dataclasses import replace
    from datetime import date, timedelta

    base = kn().release("2.21.0")
    assert base is not None
    settled = (date.today() - timedelta(days=200)).isoformat()  # older than stable's 90 days
    return replace(kn(), releases=(replace(base, tensorflow="2.22.0", released=settled), *kn().releases))


def test_rtx_5090_on_575_pins_a_ptxas_that_knows_sm_120_and_states_the_risk() -> None:
    m = machine("575.51.03", [gpu("NVIDIA GeForce RTX 5090", "12.0")], pythons=("3.12.3",))
    res = resolve(m, with_a_2_22(), STABLE)
    c = res.choice
    assert c is not None and c.tensorflow == "2.22.0" and c.jit_only
    nvcc = c.pins["nvidia-cuda-nvcc-cu12"]
    assert tuple(map(int, nvcc.split(".")[:2])) >= (12, 8) and nvcc == "12.8.93"
    assert c.hashes["nvidia-cuda-nvcc-cu12"] == [next(r.sha256 for r in kn().ptxas if r.ptxas == "12.8")]
    assert f"nvidia-cuda-nvcc-cu12=={nvcc}" in c.requirements()
    risk = next(w for w in res.warnings if "does not know compute capability 12.0" in w)
    assert "Risk:" in risk and "12.8" in risk and "docs.nvidia.com" in risk


def test_b200_gets_ptxas_12_8_and_a_cc_12_1_gpu_gets_12_9() -> None:
    kn22 = with_a_2_22()
    b200 = resolve(machine("575.51.03", [gpu("NVIDIA B200", "10.0")], pythons=("3.12.3",)), kn22, STABLE).choice
    assert b200 is not None and b200.pins["nvidia-cuda-nvcc-cu12"] == "12.8.93"
    spark = resolve(machine("580.65.06", [gpu("NVIDIA GB10", "12.1")], pythons=("3.12.3",)), kn22, STABLE).choice
    assert spark is not None and spark.pins["nvidia-cuda-nvcc-cu12"] == "12.9.86"


def test_blackwell_gets_no_release_the_tables_know_to_fail_there() -> None:
    for name, cc in (("NVIDIA GeForce RTX 5090", "12.0"), ("NVIDIA B200", "10.0"), ("NVIDIA GB10", "12.1")):
        res = resolve(machine("580.65.06", [gpu(name, cc)], pythons=("3.12.3",)), kn(), STABLE)
        assert res.choice is None, name
        assert all(any("known failure" in why for why in r.reasons) for r in res.rejected), name


def test_a_gpu_the_pinned_ptxas_knows_keeps_the_tested_pin() -> None:
    res = resolve(machine("575.51.03", [gpu("NVIDIA H100 80GB HBM3", "9.0")], pythons=("3.12.3",)), kn(), STABLE)
    assert res.choice is not None and res.choice.pins["nvidia-cuda-nvcc-cu12"] == "12.5.82"
    assert not any("ptxas" in w for w in res.warnings)


def test_a_jetson_is_named_and_given_the_jetpack_and_ngc_remedies() -> None:
    from dataclasses import replace

    m = machine("540.3.0", [gpu("Orin (nvgpu)", "8.7")], arch="aarch64")
    m = replace(m, host=replace(m.host, tegra="L4T R36.3.0; NVIDIA Jetson AGX Orin Developer Kit",
                                tegra_source="/etc/nv_tegra_release, /proc/device-tree/model"))
    res = resolve(m, kn(), STABLE)
    assert res.choice is None
    assert any("NVIDIA Jetson: L4T R36.3.0" in r and "no release in matrix.yaml has a GPU wheel for aarch64" in r
               for r in res.reasons)
    assert any("JetPack build of TensorFlow" in r and "l4t-tensorflow" in r for r in res.remedies)
    server = resolve(machine("550.54.14", [gpu("NVIDIA GH200 480GB", "9.0")], arch="aarch64"), kn(), STABLE)
    assert any("NGC TensorFlow container" in r for r in server.remedies)
    assert not any("Jetson" in r for r in server.reasons + server.remedies)


def test_a_cc_ptxas_12_8_does_not_know_though_below_its_highest_gets_12_9() -> None:
    rows = kn().ptxas
    assert ptxas_knows(rows, "12.8", "10.3") is False and ptxas_knows(rows, "12.9", "10.3") is True
    row = ptxas_for(rows, "10.3")
    assert row is not None and row.ptxas == "12.9"
    b300 = resolve(machine("580.65.06", [gpu("NVIDIA B300", "10.3")], pythons=("3.12.3",)), with_a_2_22(),
                   STABLE).choice
    assert b300 is not None and b300.pins["nvidia-cuda-nvcc-cu12"] == "12.9.86"
