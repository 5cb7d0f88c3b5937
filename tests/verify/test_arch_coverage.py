"""One coverage rule for the resolver and the in-env check, checked on every release in matrix.yaml."""

from __future__ import annotations

import importlib.util
import re

import pytest

from tfgpu_install.knowledge.load import load_knowledge
from tfgpu_install.knowledge.model import Release
from tfgpu_install.resolver.checks import gpu_coverage
from tfgpu_install.verify.gpucheck.tfgpucheck_arch import coverage, split_archs
from tfgpu_install.verify.host import CHECK_SCRIPT

_spec = importlib.util.spec_from_file_location("tfgpucheck_main_arch", CHECK_SCRIPT)
assert _spec is not None and _spec.loader is not None
check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check)

_ARCH_LIST = re.compile(r"\[((?:'(?:sm|compute)_\w+',?\s*)+)\]")


def build_archs(release: Release) -> list[str]:
    """The release's build_info arch list as its matrix source quotes it; else rebuilt from sass/ptx."""
    m = _ARCH_LIST.search(release.sources.get("sass", ""))
    if m:
        return re.findall(r"'(\w+)'", m.group(1))
    return [f"{'compute' if cc in release.ptx else 'sm'}_{cc.replace('.', '')}" for cc in release.sass] + [
        f"compute_{cc.replace('.', '')}" for cc in release.ptx if cc not in release.sass]


def test_split_archs_follows_tfs_build_config() -> None:
    assert split_archs(["sm_60", "sm_80", "compute_90"]) == (("6.0", "8.0", "9.0"), ("9.0",))
    assert split_archs(["sm_100", "compute_120", "sm_90a", "bogus"]) == (("10.0", "12.0", "9.0a"), ("12.0",))


@pytest.mark.parametrize("cc,expected", [("9.0", ("sass", "9.0")), ("8.6", ("sass", "8.0")),
                                         ("8.9", ("sass", "8.9")), ("12.0", ("ptx", "9.0")),
                                         ("7.5", ("sass", "7.0")), ("5.2", ("none", None))])
def test_coverage_of_a_tf_2_17_build(cc: str, expected: tuple[str, object]) -> None:
    sass, ptx = split_archs(["sm_60", "sm_70", "sm_80", "sm_89", "compute_90"])
    assert coverage(cc, sass, ptx) == expected


@pytest.mark.parametrize("cc", ["9.0", "8.6", "8.9", "12.0", "10.0", "7.5", "3.7"])
def test_resolver_and_gpu_check_agree_for_every_release(cc: str) -> None:
    releases = [r for r in load_knowledge().releases if r.sass or r.ptx]
    assert len(releases) > 40
    for release in releases:
        how, arch = gpu_coverage(cc, release)
        state = {"devices": [{"index": 0, "name": "G", "compute_capability": cc}],
                 "tf_measured": {"build": {"cuda_compute_capabilities": build_archs(release)}}}
        jit = check.extras(state, {}, {})["ptx_jit"]
        seen = jit["coverage"][cc]
        assert seen == (f"{how} sm_{(arch or '').replace('.', '')}" if how == "sass" else
                        f"ptx compute_{(arch or '').replace('.', '')}" if how == "ptx" else "none"), release.tensorflow
        assert (cc in jit["compute_capabilities"]) == (how == "ptx"), release.tensorflow
        if cc == "9.0" and tuple(int(x) for x in release.tensorflow.split(".")[:2]) >= (2, 16):
            assert how == "sass", release.tensorflow  # H100/H200 run TF 2.16+'s compute_90 natively


# ---- issue 25 defect 12: arch-specific SASS runs on that exact compute capability only ----------------
@pytest.mark.parametrize("archs,cc,expected", [
    (["sm_90a"], "9.0", ("sass", "9.0a")),
    (["sm_90a"], "9.1", ("none", None)),         # not a later minor of the family
    (["sm_100a"], "10.3", ("none", None)),       # B300 cannot run B200's arch-specific kernels
    (["sm_120a", "compute_90"], "12.1", ("ptx", "9.0")),
    (["sm_100a", "sm_100"], "10.3", ("sass", "10.0")),
    (["compute_90a"], "10.0", ("none", None)),   # arch-specific PTX is not JIT-compiled upwards
    (["sm_100f"], "10.3", ("sass", "10.0")),     # family-specific: the plain rule within the major
])
def test_arch_specific_sass_runs_only_on_its_exact_capability(archs: list[str], cc: str,
                                                              expected: tuple[str, object]) -> None:
    assert coverage(cc, *split_archs(archs)) == expected


@pytest.mark.parametrize("cc,expected", [("9.0", "sass"), ("9.1", "none"), ("10.0", "ptx"), ("x", "unknown")])
def test_the_snapshot_contract_uses_the_same_rule(cc: str, expected: str) -> None:
    from dataclasses import replace

    from tfgpu_install.snapshot.contract import _coverage

    release = next(r for r in load_knowledge().releases if r.sass)
    release = replace(release, sass=("9.0a",), ptx=("8.0",) if expected == "ptx" else ())
    assert _coverage(cc, release) == (expected if cc != "9.1" else "none")
    assert _coverage(cc, release) == (gpu_coverage(cc, release)[0] if cc != "x" else "unknown")
