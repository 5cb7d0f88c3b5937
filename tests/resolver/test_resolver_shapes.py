"""Table-driven: real machine shapes against the real profiles/*.yaml data.

The expected answers come from NVIDIA's and TensorFlow's own tables, not from the code:
- CUDA -> minimum Linux driver (CUDA toolkit release notes, table 3): 11.2 460.27.03, 11.4 470.42.01,
  11.8 520.61.05, 12.0 525.60.13, 12.2 535.54.03, 12.3 545.23.06, 12.4 550.54.14, 12.5 555.42.02,
  12.8 570.26, 12.9 575.51.03; minor-version compatibility: 11.x >= 450.80.02, 12.x >= 525.60.13.
- TensorFlow tested build configurations: 2.5-2.11 CUDA 11.2; 2.12-2.14 CUDA 11.8; 2.15 CUDA 12.2;
  2.16-2.17 CUDA 12.3; 2.18+ CUDA 12.5. Compiled compute capabilities (TF's .bazelrc, `compute_XY` = SASS
  and PTX for XY): <= 2.14 sm_35..sm_75 + compute_80; 2.15 adds sm_50..sm_80; 2.17+ sm_60, sm_70, sm_80,
  sm_89, compute_90 (Maxwell 5.x dropped; no release has Blackwell 10.x/12.x SASS).
- Compute capabilities (developer.nvidia.com/cuda-gpus): K80 3.7, GTX 970 5.2, GTX 1080 Ti 6.1, T4 7.5,
  A100 8.0, RTX 3090 8.6, RTX 4090 8.9, H100 9.0, RTX 5090 12.0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Optional

import pytest
from support.shapes import gpu, gpus_named, machine

from tfgpu_install.facts.model import Facts
from tfgpu_install.knowledge.load import load_knowledge, load_policy
from tfgpu_install.resolver.resolve import resolve, version_key

TODAY = date(2026, 12, 3)  # fixed, so the stable policy's age rule gives the same answer every day
GPU = {
    "K80": ("Tesla K80", "3.7"), "GTX970": ("NVIDIA GeForce GTX 970", "5.2"),
    "1080Ti": ("NVIDIA GeForce GTX 1080 Ti", "6.1"), "T4": ("Tesla T4", "7.5"),
    "A100": ("NVIDIA A100-SXM4-40GB", "8.0"), "3090": ("NVIDIA GeForce RTX 3090", "8.6"),
    "4090": ("NVIDIA GeForce RTX 4090", "8.9"), "H100": ("NVIDIA H100 80GB HBM3", "9.0"),
    "5090": ("NVIDIA GeForce RTX 5090", "12.0"), "3060L": ("NVIDIA GeForce RTX 3060 Laptop GPU", "8.6"),
}


def gpus(*keys: str) -> list:  # type: ignore[type-arg]
    return [gpu(GPU[k][0], GPU[k][1], i) for i, k in enumerate(keys)]


@dataclass(frozen=True)
class Shape:
    name: str
    facts: Facts
    profile: str
    tf_line: Optional[str]  # "2.15": the x.y line expected; None: no choice
    cuda: Optional[str] = None
    jit_only: bool = False
    option: Optional[str] = None  # a substring one of the options must contain
    remedy: Optional[str] = None  # a substring one of the remedies must contain
    warning: Optional[str] = None
    extra: dict[str, object] = field(default_factory=dict)  # resolve() keyword arguments


SHAPES = [
    # K80 (Kepler, cc 3.7) tops out at driver R470 = CUDA 11.4: TF 2.11 (CUDA 11.2) has sm_35 SASS, which
    # runs on 3.7. TF 2.12-2.14 (CUDA 11.8, still sm_35) only through 11.x minor-version compatibility.
    Shape("Tesla K80 on 470", machine("470.182.03", gpus("K80"), pythons=("3.10.12",)), "stable", "2.11", "11.2",
          option="(CUDA 11.8) would run on driver 470.182.03 through CUDA minor-version compatibility"),
    # R535 = CUDA 12.2 -> TF 2.15 (sm_50 SASS runs on 5.2); 2.16 (12.3, still sm_50) by minor compat.
    Shape("GTX 970 on 535", machine("535.183.01", gpus("GTX970"), pythons=("3.11.9",)), "stable", "2.15", "12.2",
          option="TF 2.16.2 (CUDA 12.3) would run on driver 535.183.01"),
    # R550 = CUDA 12.4 -> TF 2.17 (CUDA 12.3, sm_60 runs on 6.1); 2.18+ need 12.5.
    Shape("GTX 1080 Ti on 550", machine("550.120", gpus("1080Ti"), pythons=("3.11.9",)), "stable", "2.17", "12.3",
          option="(CUDA 12.5) would run on driver 550.120 through CUDA minor-version compatibility"),
    # R525 = CUDA 12.0 -> TF 2.14 (CUDA 11.8, sm_75).
    Shape("T4 on 525", machine("525.147.05", gpus("T4"), pythons=("3.10.12",)), "stable", "2.14", "11.8",
          option="would run on driver 525.147.05 through CUDA minor-version compatibility (12.x >= 525.60.13"),
    # R470 = CUDA 11.4 -> TF 2.11 (CUDA 11.2); its compute_80 carries sm_80 SASS and PTX.
    Shape("A100 on 470", machine("470.82.01", gpus("A100"), pythons=("3.10.12",)), "stable", "2.11", "11.2"),
    # R535 = CUDA 12.2 -> TF 2.15 (sm_80).
    Shape("A100 on 535", machine("535.104.05", gpus("A100"), pythons=("3.11.9",)), "stable", "2.15", "12.2"),
    # R525 = CUDA 12.0 -> TF 2.14 (CUDA 11.8; sm_80 SASS runs on 8.6).
    Shape("RTX 3090 on 525", machine("525.105.17", gpus("3090"), pythons=("3.10.12",)), "stable", "2.14", "11.8"),
    # R550 = CUDA 12.4 -> TF 2.17 (CUDA 12.3, sm_89).
    Shape("RTX 4090 on 550", machine("550.54.15", gpus("4090"), pythons=("3.12.3",)), "stable", "2.17", "12.3"),
    # R550 = CUDA 12.4 -> TF 2.17 (sm_90 from compute_90).
    Shape("H100 on 550", machine("550.90.07", gpus("H100"), pythons=("3.12.3",)), "stable", "2.17", "12.3"),
    # R575 = CUDA 12.9; Blackwell cc 12.0: no release <= 2.21 has SASS for it and their PTX path fails there
    # (kernels.yaml known failure; it was chosen as "JIT only" before issue #40): no choice, what runs there said.
    Shape("RTX 5090 on 575", machine("575.57.08", gpus("5090"), pythons=("3.12.3",)), "stable", None,
          remedy="known failure blackwell-ptx-jit were left out; what runs there"),
    # Mixed: the GTX 970 (5.2) caps the host at TF 2.16 (the last with sm_50); the 4090 alone runs TF 2.21.
    Shape("GTX 970 + RTX 4090 on 570", machine("570.133.07", gpus("GTX970", "4090"), pythons=("3.11.9",)),
          "stable", "2.16", "12.3", option="would run on GPU 1 alone with CUDA_VISIBLE_DEVICES=1"),
    Shape("GTX 970 + RTX 4090 on 570, --restrict-gpus",
          machine("570.133.07", gpus("GTX970", "4090"), pythons=("3.11.9",)), "stable", "2.21", "12.5",
          extra={"restrict_gpus": True}),
    # WSL2: the Windows driver 546.80 (header "CUDA Version: ERR!") = CUDA 12.3 by NVIDIA's table -> TF 2.17.
    Shape("WSL2 RTX 3060 Laptop on 546.80", machine("546.80", gpus("3060L"), wsl=True, pythons=("3.10.12",)),
          "stable", "2.17", "12.3"),
    # Old Kepler on old driver: legacy profile, R418 = CUDA 10.1 -> TF 2.3 (sm_37 SASS).
    Shape("Tesla K80 on 418, legacy", machine("418.87.01", gpus("K80"), pythons=("3.8.10",)), "legacy", "2.3",
          "10.1"),
    # No driver loaded: no choice; install a driver for the newest release (TF 2.21 needs CUDA 12.5).
    Shape("RTX 3090, no driver", machine(None, gpus("3090"), pythons=("3.11.9",)), "stable", None,
          remedy="install NVIDIA driver >= 555.42.02 (CUDA 12.5"),
    # No GPU at all, no --allow-cpu: no choice, say how on.
    Shape("no GPU", machine(None, (), pythons=("3.11.9",)), "stable", None, remedy="--allow-cpu"),
    Shape("no GPU, --allow-cpu", machine(None, (), pythons=("3.11.9",)), "stable", "2.21", extra={"allow_cpu": True}),
]


@pytest.fixture(scope="module")
def knowledge():  # type: ignore[no-untyped-def]
    return load_knowledge()


@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
def test_shape(shape: Shape, knowledge) -> None:  # type: ignore[no-untyped-def]
    res = resolve(shape.facts, knowledge, load_policy(shape.profile, knowledge), today=TODAY, **shape.extra)
    if shape.tf_line is None:
        assert res.choice is None, res.choice
        assert res.reasons
    else:
        c = res.choice
        assert c is not None, (res.reasons, res.rejected[:3], res.remedies)
        assert ".".join(c.tensorflow.split(".")[:2]) == shape.tf_line, c.tensorflow
        if shape.cuda:
            assert c.cuda == shape.cuda
        assert c.jit_only is shape.jit_only
        # a newer candidate of the same line would have been chosen first: the choice is the newest fitting one
        assert all(version_key(r.tensorflow) > version_key(c.tensorflow) for r in res.rejected)
        assert all(r.reasons for r in res.rejected)
        assert c.python in knowledge.release(c.tensorflow).pythons
    if shape.option:
        assert any(shape.option in o for o in res.options), res.options
    if shape.remedy:
        assert any(shape.remedy in r for r in res.remedies), res.remedies
    if shape.warning:
        assert any(shape.warning in w for w in res.warnings), res.warnings


def test_every_release_row_is_reasoned_about(knowledge) -> None:  # type: ignore[no-untyped-def]
    """An old GPU on a new driver: every candidate is rejected for its GPU, per device; R570 no longer
    drives Kepler at all (R470 was its last branch), so nothing fits, and the plan says why."""
    facts = machine("570.133.07", gpus_named("Tesla K80"), pythons=("3.10.12",))
    res = resolve(facts, knowledge, load_policy("legacy", knowledge), today=TODAY)
    assert res.choice is None
    assert any("newer than R470, the last branch that supports Kepler" in r for r in res.reasons)
    newer = [r for r in res.rejected if version_key(r.tensorflow) >= (2, 15)]
    assert newer and all(any("GPU 0 (Tesla K80, cc 3.7" in t for t in r.reasons) for r in newer)
