"""Property tests: for random machines the resolver never raises, and a choice never breaks a hard
constraint (checked here independently of the resolver's own code)."""

from __future__ import annotations

from typing import Optional

from hypothesis import given, settings
from hypothesis import strategies as st
from support.shapes import gpu, machine, mini_knowledge, policy

from tfgpu_install.facts.model import Facts
from tfgpu_install.knowledge.load import load_knowledge
from tfgpu_install.knowledge.model import Knowledge, Release
from tfgpu_install.resolver.model import Choice
from tfgpu_install.resolver.resolve import resolve

KN = mini_knowledge()

drivers = st.one_of(
    st.none(),
    st.builds(lambda a, b, c: f"{a}.{b}.{c:02d}", st.integers(300, 600), st.integers(0, 200), st.integers(0, 99)),
    st.sampled_from(["470.182.03", "525.60.13", "535.104.05", "550.54.14", "575.51.03", "ERR!", "", "999"]),
)
ccs = st.one_of(
    st.none(),
    st.builds(lambda a, b: f"{a}.{b}", st.integers(1, 13), st.integers(0, 9)),
    st.sampled_from(["3.7", "5.2", "6.1", "7.5", "8.0", "8.6", "8.9", "9.0", "12.0", "x.y"]),
)
pythons = st.lists(st.sampled_from(["3.6.9", "3.7.3", "3.8.10", "3.9.2", "3.10.12", "3.11.9", "3.12.3", "3.13.0"]),
                   max_size=3)
glibcs = st.one_of(st.none(), st.sampled_from(["2.12", "2.17", "2.26", "2.27", "2.28", "2.35", "2.39"]))


def _key(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in v.split("."))


def _covered(cc: str, r: Release) -> bool:
    major, minor = _key(cc)
    sass = any(_key(s)[0] == major and _key(s)[1] <= minor for s in r.sass)
    return sass or any(_key(p) <= (major, minor) for p in r.ptx)


def _violations(facts: Facts, kn: Knowledge, c: Choice, cpu_only: bool, minor_ok: bool) -> list[str]:
    r = next(x for x in kn.releases if x.tensorflow == c.tensorflow)
    python = c.python
    bad = []
    if python not in r.pythons:
        bad.append("python")
    if facts.host.glibc and _key(facts.host.glibc) < _key(r.min_glibc):
        bad.append("glibc")
    if cpu_only:
        return bad
    max_cuda = max((row.cuda for row in kn.drivers if _key(row.min_driver) <= _key(facts.driver.version or "0")),
                   key=_key, default=None)
    pinned = [".".join(v.split(".")[:2]) for n, v in r.pins.items() if n.startswith("nvidia-cuda-runtime-cu")]
    # pins_kind "wheels" (TF < 2.14, nvidia-*-cu11 wheels): the driver must run the build's CUDA, and the
    # newer 11.x wheels through minor-version compatibility, which the plan states.
    wheels = r.pins_kind == "wheels"
    needs = max([r.cuda or "99", *(pinned if r.cuda_from == "pip" and not wheels else [])], key=_key)
    if wheels and pinned and not any(row.cuda_major == pinned[0].split(".")[0]
                                     and _key(row.min_driver) <= _key(facts.driver.version or "0")
                                     for row in kn.minor_compat):
        bad.append("wheels need minor-version compatibility")
    compat = any(row.cuda_major == needs.split(".")[0] and _key(row.min_driver) <= _key(facts.driver.version or "0")
                 for row in kn.minor_compat)
    if max_cuda is None or _key(needs) > _key(max_cuda):
        if not (minor_ok and compat and not c.jit_only):
            bad.append("driver")
    visible = {int(i) for i in c.visible_devices.split(",")} if c.visible_devices else None
    for g in facts.gpus:
        if visible is not None and g.index not in visible:
            continue
        if g.compute_capability and g.compute_capability[0].isdigit() and not _covered(g.compute_capability, r):
            bad.append(f"gpu {g.index}")
    if r.blocking_defects:
        bad.append("defect")
    return bad


REAL: list[Knowledge] = []


def real_knowledge() -> Knowledge:
    if not REAL:
        REAL.append(load_knowledge())
    return REAL[0]


@settings(max_examples=250, deadline=None)
@given(
    driver=drivers,
    gpu_ccs=st.lists(ccs, max_size=3),
    pys=pythons,
    glibc=glibcs,
    allow_cpu=st.booleans(),
    conda=st.booleans(),
    prefer=st.sampled_from(["newest", "oldest"]),
    minor=st.booleans(),
    restrict=st.booleans(),
)
def test_a_choice_never_violates_a_hard_constraint(
    driver: Optional[str], gpu_ccs: list[Optional[str]], pys: list[str], glibc: Optional[str],
    allow_cpu: bool, conda: bool, prefer: str, minor: bool, restrict: bool,
) -> None:
    check_machine(KN, driver, gpu_ccs, pys, glibc, allow_cpu, conda, prefer, minor, restrict)


@settings(max_examples=120, deadline=None)
@given(driver=drivers, gpu_ccs=st.lists(ccs, max_size=3), pys=pythons, glibc=glibcs, allow_cpu=st.booleans(),
       conda=st.booleans(), prefer=st.sampled_from(["newest", "oldest"]), minor=st.booleans(),
       restrict=st.booleans())
def test_a_choice_never_violates_a_hard_constraint_on_the_real_tables(
    driver: Optional[str], gpu_ccs: list[Optional[str]], pys: list[str], glibc: Optional[str],
    allow_cpu: bool, conda: bool, prefer: str, minor: bool, restrict: bool,
) -> None:
    check_machine(real_knowledge(), driver, gpu_ccs, pys, glibc, allow_cpu, conda, prefer, minor, restrict)


def check_machine(
    KN: Knowledge, driver: Optional[str], gpu_ccs: list[Optional[str]], pys: list[str], glibc: Optional[str],
    allow_cpu: bool, conda: bool, prefer: str, minor: bool = False, restrict: bool = False,
) -> None:
    facts = machine(driver, [gpu(f"GPU{i}", cc, i) for i, cc in enumerate(gpu_ccs)], pythons=pys, glibc=glibc,
                    conda="/opt/conda/bin/conda" if conda else None)
    res = resolve(facts, KN, policy("p", prefer=prefer), allow_cpu=allow_cpu, allow_minor_compat=minor,
                  restrict_gpus=restrict)
    rejected = [r.tensorflow for r in res.rejected]
    assert len(rejected) == len(set(rejected))
    assert all(r.reasons for r in res.rejected)  # every rejection says why
    if res.choice is None:
        assert res.reasons and (res.remedies or res.rejected)
        return
    c = res.choice
    assert c.tensorflow not in rejected
    # Without --strict-driver a release with SASS for every GPU is taken through minor-version compatibility
    # over a PTX-JIT-only one the driver runs outright, and the plan says so (resolve._native_text).
    native = any("so it is chosen; --strict-driver keeps" in r for r in res.reasons)
    assert not _violations(facts, KN, c, res.cpu_only, minor or native)
    if c.visible_devices:
        assert restrict and set(c.visible_devices.split(",")) <= {str(g.index) for g in facts.gpus}
    if c.python_path is not None:
        assert c.python in {".".join(p.split(".")[:2]) for p in pys}
    elif not conda:
        raise AssertionError("python_path None needs conda to provide the interpreter")
    if res.cpu_only:
        assert allow_cpu


@settings(max_examples=100, deadline=None)
@given(driver=st.text(max_size=20), cc=st.text(max_size=8), glibc=st.text(max_size=8),
       py=st.text(max_size=8), cvd=st.one_of(st.none(), st.text(max_size=10)))
def test_resolve_never_raises_on_junk_facts(driver: str, cc: str, glibc: str, py: str, cvd: Optional[str]) -> None:
    facts = machine(driver or None, [gpu("junk", cc or None)], glibc=glibc or None,
                    cuda_visible_devices=cvd)
    facts = facts.__class__(**{**facts.__dict__, "pythons": ()}) if not py else facts
    res = resolve(facts, KN, policy("p"), allow_cpu=True)
    assert isinstance(res.reasons, tuple) and res.reasons
