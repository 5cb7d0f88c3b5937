"""The shipped knowledge (profiles/*.yaml): it loads, every row is sourced, the lookups answer
real machines right."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import load_cases
from tfgpu_install.errors import BadInputError, UsageError
from tfgpu_install.knowledge.gpu_names import gpu_by_name
from tfgpu_install.knowledge.load import _load_cached, load_knowledge, load_policy, profiles_dir
from tfgpu_install.knowledge.model import Knowledge, max_cuda_for_driver, minor_compat_for_driver


@pytest.fixture(scope="module")
def kn() -> Knowledge:
    return load_knowledge()


def _key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.replace(".post", ".").split("."))


def test_every_release_2_0_to_2_21_is_there(kn: Knowledge) -> None:
    versions = [r.tensorflow for r in kn.releases]
    assert versions == sorted(versions, key=_key, reverse=True)  # newest first
    assert versions[0] == "2.21.0" and versions[-1] == "2.0.0"
    lines = {".".join(v.split(".")[:2]) for v in versions}
    assert lines == {f"2.{i}" for i in range(0, 22)}
    for v in ("2.15.0", "2.15.0.post1", "2.15.1", "2.16.1", "2.16.2", "2.17.1", "2.18.1", "2.19.1", "2.20.0"):
        assert kn.release(v) is not None, v


def test_every_row_has_a_source(kn: Knowledge) -> None:
    for r in kn.releases:
        assert r.source.startswith("wheel:"), r.tensorflow
        for field in ("cuda", "cudnn", "min_glibc", "pythons", "released"):
            assert kn.release(r.tensorflow) and r.sources.get(field), (r.tensorflow, field)
        if r.sass:
            assert r.sources.get("sass"), r.tensorflow
        else:
            assert "sass" in r.unconfirmed, r.tensorflow
        for d in r.defects:
            assert d.source and d.id and d.text
    for row in kn.drivers:
        assert row.source.startswith("https://"), row
    for m in kn.minor_compat:
        assert m.source.startswith("https://"), m
    for g in kn.gpus:
        assert g.source.startswith("https://"), g
    for p in kn.policies.values():
        assert p.source, p.name


def test_release_facts_read_from_the_wheels(kn: Knowledge) -> None:
    gpu20 = kn.release("2.0.0")
    assert gpu20 is not None and gpu20.package == "tensorflow-gpu" and gpu20.cuda == "10.0"
    assert all(r.package == "tensorflow" for r in kn.releases if not r.tensorflow.startswith("2.0."))
    r = kn.release("2.15.1")
    assert r is not None
    assert (r.cuda, r.cudnn, r.cuda_from, r.extra, r.pins_kind) == ("12.2", "8.9", "pip", "and-cuda", "exact")
    assert r.pins["nvidia-cudnn-cu12"] == "8.9.4.25" and "tensorrt" not in r.pins
    assert r.sass == ("5.0", "6.0", "7.0", "7.5", "8.0") and r.ptx == ("8.0",)
    assert r.pythons == ("3.9", "3.10", "3.11") and r.min_glibc == "2.17"
    assert r.constraints["numpy"] == "<2.0.0,>=1.23.5"
    # the extra floats since 2.20: pins are the build's own versions, the ranges are kept verbatim
    r21 = kn.release("2.21.0")
    assert r21 is not None and r21.pins_kind == "tested" and r21.min_glibc == "2.27"
    assert r21.pins["nvidia-cudnn-cu12"] == "9.3.0.75" and r21.cudnn == "9.3" and r21.cuda == "12.5"
    assert r21.extra_requires["nvidia-cudnn-cu12"] == "<10.0,>=9.3.0.75"
    assert r21.sass[-1] == "9.0" and r21.ptx == ("9.0",)
    # system CUDA before 2.14, pip after
    # system CUDA before 2.5 (CUDA 10.x, and 11.0 whose libcusolver.so.10 no cu11 wheel has); 2.5-2.13: the
    # installer's own nvidia-*-cu11 pins (no extra); the extra from 2.14 on
    assert {r.cuda_from for r in kn.releases if _key(r.tensorflow) < (2, 5)} == {"system"}
    assert {(r.cuda_from, r.pins_kind, r.extra) for r in kn.releases
            if (2, 5) <= _key(r.tensorflow) < (2, 14)} == {("pip", "wheels", None)}
    assert {r.cuda_from for r in kn.releases if _key(r.tensorflow) >= (2, 14)} == {"pip"}
    for rel in kn.releases:
        # pins are the nvidia-* wheels; the extra's own list (TensorRT too) is kept verbatim
        assert all(n.startswith("nvidia-") for n in rel.pins), rel.tensorflow
        if rel.pins_kind == "exact":
            assert all(rel.extra_requires[n] == f"=={v}" for n, v in rel.pins.items())
    assert "tensorrt-libs" in kn.release("2.15.0").extra_requires  # type: ignore[union-attr]


def test_known_defects(kn: Knowledge) -> None:
    d150 = {d.id: d for d in kn.release("2.15.0").defects}  # type: ignore[union-attr]
    assert d150["trt-pins-uninstallable"].blocks and d150["trt-pins-uninstallable"].path == "pip"
    assert "2.15.0.post1" in (d150["trt-pins-uninstallable"].fix or "")
    assert not any(d.blocks for d in kn.release("2.15.0.post1").defects)  # type: ignore[union-attr]
    d161 = {d.id: d for d in kn.release("2.16.1").defects}  # type: ignore[union-attr]
    assert "LD_LIBRARY_PATH" in (d161["pip-cuda-libs-not-found"].fix or "")
    trt14 = {d.id: d for d in kn.release("2.14.1").defects}["trt-pin-no-py311"]  # type: ignore[union-attr]
    assert trt14.pythons == ("3.11",) and not trt14.blocks
    # No release carries SASS for Blackwell (10.x / 12.x); kernels.yaml's known failures say what that
    # means, one row per GPU family (a per-release defect that said "no SASS" was code's work, issue #40).
    for r in kn.releases:
        assert not any(_key(s)[0] >= 10 for s in r.sass), r.tensorflow
        assert "no-blackwell-sass" not in {d.id for d in r.defects}
    from tfgpu_install.knowledge.gpu_rules import known_failure

    for cc in ("10.0", "10.3", "12.0", "12.1"):
        assert all(known_failure(kn.known_failures, r.tensorflow, cc, has_sass=False) for r in kn.releases), cc


@pytest.mark.parametrize(
    "driver, cuda",
    [
        ("331.62", "6.0"), ("340.29", "6.5"), ("367.48", "8.0"), ("384.130", "9.0"), ("410.79", "10.0"),
        ("418.87.01", "10.1"), ("440.33.01", "10.2"), ("450.80.02", "11.0"), ("460.32.03", "11.2"),
        ("470.82.01", "11.4"), ("470.256.02", "11.4"), ("510.47.03", "11.6"), ("520.61.05", "11.8"),
        ("525.60.13", "12.0"), ("525.147.05", "12.0"), ("535.104.05", "12.2"), ("545.29.06", "12.3"),
        ("550.54.15", "12.4"), ("550.127.05", "12.4"), ("555.42.06", "12.5"), ("560.35.03", "12.6"),
        ("570.124.06", "12.8"), ("575.57.08", "12.9"), ("580.95.05", "13.0"),
    ],
)
def test_max_cuda_for_real_drivers(kn: Knowledge, driver: str, cuda: str) -> None:
    row = max_cuda_for_driver(kn, driver)
    assert row is not None and row.cuda == cuda, (driver, row)


def test_driver_too_old_and_malformed(kn: Knowledge) -> None:
    assert max_cuda_for_driver(kn, "304.137") is None
    with pytest.raises(BadInputError, match="not a driver version"):
        max_cuda_for_driver(kn, "unknown")


@pytest.mark.parametrize(
    "driver, major",
    [("418.87", None), ("450.80.02", "11"), ("470.82.01", "11"), ("525.60.13", "12"), ("535.104.05", "12"),
     ("575.57.08", "12"), ("580.65.06", "13")],
)
def test_minor_compat(kn: Knowledge, driver: str, major: str) -> None:
    row = minor_compat_for_driver(kn, driver)
    assert (row.cuda_major if row else None) == major


def test_fixture_gpu_names_match(kn: Knowledge) -> None:
    """Every GPU the recorded nvidia-smi outputs name, at the capability the case expects."""
    seen = 0
    for case in load_cases("nvidia-smi"):
        for gpu in (case.get("expected") or {}).get("gpus") or []:
            name, cc = gpu.get("name"), gpu.get("compute_capability")
            if not isinstance(name, str) or not cc or name.startswith("("):
                continue
            # the expected names carry notes in parentheses; the verbatim names do not
            name = re.sub(r"\s*\((truncated|Laptop)[^)]*\)$", "", name)
            row = gpu_by_name(kn, name)
            assert row is not None, name
            assert row.compute_capability == str(cc), (name, row)
            seen += 1
    assert seen >= 8


@pytest.mark.parametrize(
    "name, cc",
    [
        ("Tesla K80", "3.7"), ("GeForce GTX 680", "3.0"), ("NVIDIA GeForce RTX 3090", "8.6"),
        ("NVIDIA A100-SXM4-40GB", "8.0"), ("NVIDIA A100 80GB PCIe", "8.0"), ("A100-SXM4-80GB", "8.0"),
        ("NVIDIA H100 80GB HBM3", "9.0"), ("NVIDIA H100 PCIe", "9.0"), ("NVIDIA H100 NVL", "9.0"),
        ("NVIDIA H200", "9.0"), ("NVIDIA GeForce RTX 5090", "12.0"), ("Tesla T4", "7.5"),
        ("GeForce GTX 970", "5.2"), ("GeForce GTX 1080 Ti", "6.1"), ("NVIDIA RTX A6000", "8.6"),
        ("Quadro RTX 6000", "7.5"), ("NVIDIA RTX 6000 Ada Generation", "8.9"), ("Tesla V100-SXM2-16GB", "7.0"),
        ("Tesla V100-PCIE-32GB", "7.0"), ("Tesla P100-PCIE-16GB", "6.0"), ("TITAN Xp", "6.1"),
        ("TITAN X (Pascal)", "6.1"), ("GeForce GTX TITAN X", "5.2"), ("NVIDIA GeForce RTX 4090 Laptop GPU", "8.9"),
        ("NVIDIA GeForce RTX 3060 Laptop GPU", "8.6"), ("GeForce RTX 208...", "7.5"),
        ("NVIDIA GeForce RTX 3060 ...", "8.6"), ("NVIDIA RTX PRO 1000 Blac...", "12.0"),
        ("nvidia geforce rtx 3090", "8.6"), ("  NVIDIA   GeForce  RTX 3090 ", "8.6"), ("GeForce RTX 3090", "8.6"),
        ("RTX 3090", "8.6"), ("NVIDIA Tesla T4", "7.5"), ("NVIDIA T4", "7.5"), ("NVIDIA A10G", "8.6"),
        ("NVIDIA L4", "8.9"), ("NVIDIA L40S", "8.9"), ("NVIDIA B200", "10.0"), ("NVIDIA GH200 480GB", "9.0"),
        ("Quadro K3100M", "3.0"), ("NVIDIA GeForce GTX 750 Ti", "5.0"), ("GeForce GTX 960M", "5.0"),
    ],
)
def test_gpu_by_name_spellings(kn: Knowledge, name: str, cc: str) -> None:
    row = gpu_by_name(kn, name)
    assert row is not None, name
    assert row.compute_capability == cc, (name, row)


@pytest.mark.parametrize("name", ["", "   ", "NVIDIA Graphics Device", "GeForce GTX ...", "Radeon RX 7900",
                                  "NVIDIA RTX"])
def test_gpu_by_name_unknown_or_ambiguous(kn: Knowledge, name: str) -> None:
    assert gpu_by_name(kn, name) is None


def test_policies_load(kn: Knowledge) -> None:
    assert set(kn.policies) == {"stable", "latest", "legacy", "preview"}
    stable = load_policy("stable", kn)
    assert stable.require_patch_release and stable.min_age_days > 0 and stable.prefer == "newest"
    assert not load_policy("latest", kn).require_patch_release
    assert "system" in load_policy("legacy", kn).cuda_from
    with pytest.raises(UsageError) as err:  # a typo on the command line: exit 2 (#43)
        load_policy("bleeding", kn)
    assert "legacy" in (err.value.hint or "") and "stable" in (err.value.hint or "")


def test_user_policy_file(kn: Knowledge, tmp_path: Path) -> None:
    f = tmp_path / "mine.yaml"
    f.write_text('name: mine\ndescription: pinned range\nprefer: oldest\ntensorflow: ">=2.12,<2.18"\n'
                 'source: my team\ncuda_from: [pip]\n')
    p = load_policy(str(f), kn)
    assert (p.name, p.prefer, p.tensorflow, p.cuda_from, p.path) == ("mine", "oldest", ">=2.12,<2.18", ("pip",), str(f))
    with pytest.raises(BadInputError, match="does not exist"):
        load_policy(str(tmp_path / "missing.yaml"), kn)
    f.write_text("name: mine\ndescription: x\nprefer: sideways\nsource: me\n")
    with pytest.raises(BadInputError, match=r"mine.yaml:3: prefer: expected one of newest, oldest"):
        load_policy(str(f), kn)
    f.write_text('name: mine\ndescription: x\nprefer: newest\nsource: me\ntensorflow: "2.x"\n')
    with pytest.raises(BadInputError, match=r":5: tensorflow: not a version specifier"):
        load_policy(str(f), kn)


def test_disk_cache_is_used_and_keyed_by_content(tmp_path: Path) -> None:
    import shutil

    d = tmp_path / "profiles"
    shutil.copytree(profiles_dir(), d, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    cache = tmp_path / "cache"
    first = load_knowledge(d, cache_dir=cache)
    cached = list((cache / "knowledge").glob("*.json"))
    assert len(cached) == 1
    _load_cached.cache_clear()
    assert load_knowledge(d, cache_dir=cache) == first  # served from the cache
    # an edit changes the key: the file is parsed (and validated) again
    text = (d / "latest.yaml").read_text().replace("newest release that fits", "edited")
    (d / "latest.yaml").write_text(text)
    _load_cached.cache_clear()
    assert load_knowledge(d, cache_dir=cache).policies["latest"].description.startswith("edited")
    assert len(list((cache / "knowledge").glob("*.json"))) == 2


def test_names_in_recorded_tables_match(kn: Knowledge) -> None:
    """The names as they appear verbatim in the recorded nvidia-smi tables / CSV / -q outputs
    (tests/fixtures/shared and the probe's extra fixtures), including ones cut short with '...'."""
    import yaml

    fixtures = Path(__file__).resolve().parents[1] / "fixtures"
    names: set[str] = set()
    for f in sorted(fixtures.glob("nvidia-smi*/*.yaml")) + sorted(fixtures.glob("shared/nvidia-smi/*.yaml")):
        text = (yaml.safe_load(f.read_text()) or {}).get("verbatim") or ""
        names.update(m.group(1).strip() for m in re.finditer(r"^\|\s+\d+\s+(.+?)\s{2,}(?:On|Off)\s", text, re.M))
        names.update(m.group(1).strip() for m in re.finditer(r"^\s*\d+, ([^,]+), GPU-", text, re.M))
        names.update(m.group(1).strip() for m in re.finditer(r"Product Name\s+: (.+)$", text, re.M))
    names.discard("NVIDIA GeForce ...")  # cut too short to tell (correctly unknown)
    assert len(names) >= 10
    unknown = sorted(n for n in names if gpu_by_name(kn, n) is None)
    assert not unknown, unknown


# ---------------------------------------------------------------- issue 12: every name, and PCI ids

# Names as nvidia-smi / NVML / deviceQuery print them, with the compute capability NVIDIA publishes
# (https://developer.nvidia.com/cuda-gpus): laptop, Max-Q, "with Max-Q Design", "D" (China), workstation,
# data-center, MIG and Jetson spellings.
NAMES = {
    "NVIDIA GeForce RTX 3060 Laptop GPU": "8.6", "NVIDIA GeForce RTX 2080 with Max-Q Design": "7.5",
    "GeForce GTX 1070 with Max-Q Design": "6.1", "Quadro RTX 5000 with Max-Q Design": "7.5",
    "NVIDIA GeForce RTX 4090 D": "8.9", "NVIDIA GeForce RTX 5090 D v2": "12.0",
    "NVIDIA RTX A2000 8GB Laptop GPU": "8.6", "NVIDIA RTX 3500 Ada Generation Laptop GPU": "8.9",
    "NVIDIA RTX 5880 Ada Generation": "8.9", "NVIDIA A100-SXM4-40GB MIG 1g.5gb": "8.0",
    "NVIDIA H100 80GB HBM3 MIG 1g.10gb": "9.0", "Tesla V100-FHHL-16GB": "7.0", "NVIDIA L20": "8.9",
    "Jetson AGX Orin": "8.7", "Orin (nvgpu)": "8.7", "NVIDIA Tegra X1": "5.3", "Jetson Nano": "5.3",
    "Xavier": "7.2", "Jetson TX2": "6.2", "Jetson TK1": "3.2", "GeForce MX150": "6.1",
    "NVIDIA GeForce MX450": "7.5", "NVIDIA GeForce RTX 2050": "8.6", "GeForce 940MX": "5.0",
    "nvidia geforce rtx 3090": "8.6", "RTX 3060": "8.6", "GeForce RTX 3080 Lite Hash Rate": "8.6",
}


@pytest.mark.parametrize("name", sorted(NAMES))
def test_every_kind_of_gpu_name(kn: Knowledge, name: str) -> None:
    row = gpu_by_name(kn, name)
    assert row is not None and row.compute_capability == NAMES[name], name
    assert row.source.startswith("https://developer.nvidia.com/")


def test_gpu_table_spans_kepler_to_blackwell(kn: Knowledge) -> None:
    archs = {r.architecture for r in kn.gpus}
    assert {"Kepler", "Maxwell", "Pascal", "Volta", "Turing", "Ampere", "Ada", "Hopper", "Blackwell"} <= archs
    assert all(r.source for r in kn.gpus)


PCI_SAMPLE = """\
#	Version: 2023.04.10
10de  NVIDIA Corporation
\t1392  GM107M [GeForce GTX 860M]
\t119a  GK104M [GeForce GTX 860M]
\t11a0  GK104M [GeForce GTX 680M]
\t11a1  GK104M [GeForce GTX 670MX]
\t11a7  GK104M [GeForce GTX 675MX]
\t11e0  GK104M [GeForce GTX 770M]
\t11e2  GK104M [GeForce GTX 765M]
\t2204  GA102 [GeForce RTX 3090]
\t2200  GA102
\t1aef  GA102 High Definition Audio Controller
\t249c  GA104M [GeForce RTX 3080 Mobile / Max-Q 8GB/16GB]
\t\t1043 1234  some subsystem
1002  Advanced Micro Devices, Inc. [AMD/ATI]
\t2204  Not NVIDIA [Radeon]
"""


def test_pci_table_from_pci_ids_names_and_chips(kn: Knowledge) -> None:
    from tfgpu_install.knowledge.pci_ids import build_table, parse_pci_ids

    devices = parse_pci_ids(PCI_SAMPLE)
    assert [d.device_id for d in devices] == ["1392", "119a", "11a0", "11a1", "11a7", "11e0", "11e2", "2204",
                                              "2200", "1aef", "249c"]
    assert devices[-1].names == ("GeForce RTX 3080 Mobile", "GeForce RTX 3080 Max-Q 8GB/16GB")
    table = {e.device_id: e for e in build_table(devices, kn.gpus)}
    assert (table["2204"].compute_capability, table["2204"].how) == ("8.6", "name")
    assert (table["2200"].compute_capability, table["2200"].how) == ("8.6", "chip")  # named only by its die
    assert "1aef" not in table  # the card's audio function is no GPU
    assert table["249c"].compute_capability == "8.6"
    # One name on two dies: the die decides (GK104M is Kepler 3.0; the GM107M 860M is 5.0).
    assert table["119a"].compute_capability == "3.0" and table["1392"].compute_capability == "5.0"


def test_packaged_pci_table_is_consistent(kn: Knowledge) -> None:
    from tfgpu_install.knowledge.pci_ids import load_pci_table, lookup_pci

    table = load_pci_table(profiles_dir() / "pci_ids.yaml")
    assert len(table.entries) > 400 and table.source.startswith("https://pci-ids.ucw.cz/")
    for raw in ("0x220410DE", "0x2204", "10de:2204", "2204"):
        hit = lookup_pci(table, raw)
        assert hit is not None and hit.compute_capability == "8.6", raw
    assert lookup_pci(table, "0xffff10DE") is None and lookup_pci(table, "garbage") is None
    ccs = {r.compute_capability for r in kn.gpus}
    assert all(e.compute_capability in ccs for e in table.entries.values())
