"""The architecture floor (issue #40): cuDNN >= 9.11 and CUDA 13 have no kernels for compute capability < 7.5
(profiles/kernels.yaml floors). On the real tables: every release whose cuDNN range reaches 9.11 gets a pin
that runs the oldest GPU of the machine, or is rejected with the reason; a Turing-or-newer machine keeps its pin."""

from __future__ import annotations

from dataclasses import replace

import pytest
from support.shapes import gpu, machine, policy

from tfgpu_install.knowledge.load import load_knowledge
from tfgpu_install.knowledge.model import Knowledge, Release, version_key
from tfgpu_install.resolver.resolve import resolve

LATEST = policy("latest")
OLD = [("NVIDIA GeForce GTX 1060 6GB", "6.1"), ("NVIDIA TITAN V", "7.0"), ("Tesla V100-SXM2-16GB", "7.0")]


def kn() -> Knowledge:
    return load_knowledge()


def only(release: Release) -> Knowledge:
    return replace(kn(), releases=(release,))


def cudnn_range_reaches_9_11(r: Release) -> bool:
    from packaging.specifiers import SpecifierSet

    spec = next((s for n, s in r.extra_requires.items() if n.startswith("nvidia-cudnn-")), "")
    return bool(spec) and SpecifierSet(spec).contains("9.11.0.98")


@pytest.mark.parametrize("name, cc", OLD)
def test_an_old_gpu_gets_a_cudnn_that_has_its_kernels_for_every_release_whose_range_allows_a_newer(
        name: str, cc: str) -> None:
    reaching = [r for r in kn().releases if cudnn_range_reaches_9_11(r)]
    assert {r.tensorflow for r in reaching} >= {"2.20.0", "2.21.0"}
    for r in reaching:
        res = resolve(machine("575.51.03", [gpu(name, cc)], pythons=("3.12.3",)), only(r), LATEST)
        assert res.choice is not None, (r.tensorflow, res.rejected)
        pin = next(v for n, v in res.choice.pins.items() if n.startswith("nvidia-cudnn-"))
        assert version_key(pin) < (9, 11), (r.tensorflow, pin)
        said = " ".join(res.reasons)
        assert "would also allow cuDNN >= 9.11, which has none" in said and "support-matrix" in said


def test_a_pin_above_the_floor_is_lowered_to_the_newest_in_range_with_its_hash() -> None:
    base = kn().release("2.21.0")
    assert base is not None
    r = replace(base, tensorflow="2.22.0", pins={**base.pins, "nvidia-cudnn-cu12": "9.11.0.98"},
                pin_hashes={}, extra_requires={**base.extra_requires, "nvidia-cudnn-cu12": "<10.0,>=9.10.2.21"})
    res = resolve(machine("575.51.03", [gpu("NVIDIA GeForce GTX 1060 6GB", "6.1")], pythons=("3.12.3",)), only(r),
                  LATEST)
    c = res.choice
    assert c is not None and c.pins["nvidia-cudnn-cu12"] == "9.10.2.21" and c.cudnn == "9.10"
    row = next(f for f in kn().floors if f.library == "cudnn")
    assert c.hashes["nvidia-cudnn-cu12"] == [row.sha256]
    assert "nvidia-cudnn-cu12==9.10.2.21" in c.requirements()
    assert any("so the plan pins nvidia-cudnn-cu12==9.10.2.21" in x for x in res.reasons)
    # The control: an H100 keeps the release's own pin.
    h100 = resolve(machine("575.51.03", [gpu("NVIDIA H100 80GB HBM3", "9.0")], pythons=("3.12.3",)), only(r), LATEST)
    assert h100.choice is not None and h100.choice.pins["nvidia-cudnn-cu12"] == "9.11.0.98"
    assert not any("cuDNN >=" in x for x in h100.reasons)


def test_a_range_above_the_floor_is_rejected_with_the_reason() -> None:
    base = kn().release("2.21.0")
    assert base is not None
    r = replace(base, tensorflow="2.23.0", pins={**base.pins, "nvidia-cudnn-cu12": "9.12.0.46"},
                extra_requires={**base.extra_requires, "nvidia-cudnn-cu12": "<10.0,>=9.12.0.46"})
    res = resolve(machine("575.51.03", [gpu("Tesla V100-SXM2-16GB", "7.0")], pythons=("3.12.3",)), only(r), LATEST)
    assert res.choice is None
    why = " ".join(res.rejected[0].reasons)
    assert "no cuDNN in TF 2.23.0's range nvidia-cudnn-cu12<10.0,>=9.12.0.46 has kernels for cc 7.0" in why
    assert "no cuDNN in range has kernels" in res.rejected[0].summary


def test_a_cuda_13_release_is_rejected_on_a_gpu_below_7_5_and_kept_on_turing() -> None:
    base = kn().release("2.21.0")
    assert base is not None
    pins = {n.replace("-cu12", "-cu13"): v for n, v in base.pins.items()}
    r = replace(base, tensorflow="2.23.0", cuda="13.0", pins=pins, pin_hashes={},
                extra_requires={n.replace("-cu12", "-cu13"): s for n, s in base.extra_requires.items()})
    old = resolve(machine("580.65.06", [gpu("NVIDIA GeForce GTX 1060 6GB", "6.1")], pythons=("3.12.3",)), only(r),
                  LATEST)
    assert old.choice is None
    assert any("needs CUDA 13.0: CUDA >= 13.0 has no kernels for compute capability < 7.5" in w
               for w in old.rejected[0].reasons)
    t4 = resolve(machine("580.65.06", [gpu("Tesla T4", "7.5")], pythons=("3.12.3",)), only(r), LATEST)
    assert t4.choice is not None and t4.choice.tensorflow == "2.23.0"


def test_exact_pins_below_the_floor_say_nothing() -> None:
    r = kn().release("2.15.1")  # the and-cuda extra pins cuDNN 8.9 exactly: no 9.11 can come
    assert r is not None
    res = resolve(machine("535.104.05", [gpu("NVIDIA GeForce GTX 1060 6GB", "6.1")], pythons=("3.11.9",)), only(r),
                  LATEST)
    assert res.choice is not None and not any("cuDNN >=" in x for x in res.reasons)


def test_a_mixed_machine_is_judged_by_its_oldest_gpu() -> None:
    base = kn().release("2.21.0")
    assert base is not None
    r = replace(base, pins={**base.pins, "nvidia-cudnn-cu12": "9.11.0.98"}, pin_hashes={})
    m = machine("575.51.03", [gpu("NVIDIA H100 80GB HBM3", "9.0"), gpu("NVIDIA TITAN V", "7.0", index=1)],
                pythons=("3.12.3",))
    res = resolve(m, only(r), LATEST)
    assert res.choice is not None and res.choice.pins["nvidia-cudnn-cu12"] == "9.10.2.21"
