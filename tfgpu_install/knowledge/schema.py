"""Validation of the knowledge files into the dataclasses of tfgpu_install.knowledge.model.

Each `parse_*` reads one file (knowledge_yaml.read_yaml keeps line numbers) and raises
BadInputError "<file>:<line>: <path>: <problem>" with a hint on the first problem.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Optional

from tfgpu_install.knowledge.model import (
    ArchRow,
    Defect,
    DriverRow,
    FloorRow,
    GpuRow,
    KnownFailure,
    MinorCompatRow,
    Policy,
    PtxasRow,
    Release,
    release_key,
)
from tfgpu_install.knowledge.yaml_reader import (
    DATE,
    DRIVER,
    TF_VERSION,
    VERSION2,
    VERSION_ANY,
    Checker,
    LDict,
    read_yaml,
)

RELEASE_REQUIRED = (
    "tensorflow", "package", "released", "pythons", "cuda", "cudnn", "sass", "ptx",
    "manylinux", "min_glibc", "cuda_from", "source",
)
RELEASE_OPTIONAL = (
    "extra", "pins", "pins_kind", "extra_requires", "constraints", "defects", "sources", "pin_hashes", "sonames",
    "unconfirmed", "arches", "notes", "build_info", "first_seen",
)
# Field names an `unconfirmed:` list may name (Release fields).
RELEASE_FIELDS = set(RELEASE_REQUIRED + RELEASE_OPTIONAL) - {"source", "sources", "unconfirmed", "first_seen"}


def _top(c: Checker, data: Any, key: str, extra: tuple[str, ...] = ()) -> Any:
    if data is None:
        c.fail(1, key, "the file is empty", f"it needs a top-level `{key}:` list")
    top = c.mapping(data, "", 1, required=(key,), optional=extra)
    return top


def parse_matrix(path: Path, label: str) -> tuple[Release, ...]:
    c = Checker(label)
    top = _top(c, read_yaml(path, label), "releases", ("format",))
    rows = c.seq(top["releases"], "releases", c.line_of(top, "releases"))
    releases: list[Release] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(rows):
        p = f"releases[{i}]"
        row = c.mapping(raw, p, c.line_of(rows, i), RELEASE_REQUIRED, RELEASE_OPTIONAL)
        rel = _release(c, row, p)
        if rel.tensorflow in seen:
            c.fail(row.line, f"{p}.tensorflow", f"duplicate version {rel.tensorflow} "
                   f"(first at line {seen[rel.tensorflow]})", "keep one row per release")
        seen[rel.tensorflow] = row.line
        releases.append(rel)
    # Newest first: the order policies walk by default.
    releases.sort(key=lambda r: release_key(r.tensorflow), reverse=True)
    return tuple(releases)


def _release(c: Checker, row: LDict, p: str) -> Release:
    s = c.string
    tf = s(row, "tensorflow", f"{p}.tensorflow", pattern=TF_VERSION, example="2.15.1") or ""
    cuda_from = s(row, "cuda_from", f"{p}.cuda_from", choices=("pip", "system")) or ""
    extra = s(row, "extra", f"{p}.extra", optional=True)
    pins = _projects(c, row, "pins", p, c.str_map(row, "pins", f"{p}.pins", pattern=VERSION_ANY, example="9.3.0.75"))
    pins_kind = s(row, "pins_kind", f"{p}.pins_kind", optional=True,
                  choices=("exact", "tested", "wheels", "none")) or ("exact" if pins else "none")
    if pins and pins_kind == "none":
        c.fail(c.line_of(row, "pins"), f"{p}.pins_kind", "pins given but pins_kind is none",
               "say `exact` (the extra pins ==) or `tested` (the build's own versions)")
    # "wheels": no extra exists (TF < 2.14); the pins are the installer's own choice of nvidia-*-cu11 wheels.
    if cuda_from == "pip" and not extra and pins_kind != "wheels":
        c.fail(c.line_of(row, "cuda_from"), f"{p}.extra", "cuda_from: pip needs the extra's name",
               "add `extra: and-cuda`")
    unconfirmed = c.strings(row, "unconfirmed", f"{p}.unconfirmed")
    for j, name in enumerate(unconfirmed):
        if name not in RELEASE_FIELDS:
            c.fail(c.line_of(row["unconfirmed"], j), f"{p}.unconfirmed[{j}]",
                   f"{name!r} is not a field of a release", "name one of: " + ", ".join(sorted(RELEASE_FIELDS)))
    defects = []
    raw_defects = row.get("defects")
    if raw_defects is not None:
        dl = c.seq(raw_defects, f"{p}.defects", c.line_of(row, "defects"))
        for k, d in enumerate(dl):
            dp = f"{p}.defects[{k}]"
            dm = c.mapping(d, dp, c.line_of(dl, k), ("id", "text", "source"), ("blocks", "fix", "pythons", "path"))
            defects.append(Defect(
                id=s(dm, "id", f"{dp}.id") or "",
                text=s(dm, "text", f"{dp}.text") or "",
                source=s(dm, "source", f"{dp}.source") or "",
                blocks=c.boolean(dm, "blocks", f"{dp}.blocks", False),
                fix=s(dm, "fix", f"{dp}.fix", optional=True),
                pythons=c.strings(dm, "pythons", f"{dp}.pythons", pattern=VERSION2, example="3.11"),
                path=s(dm, "path", f"{dp}.path", optional=True, choices=("pip", "system")),
            ))
    cuda = s(row, "cuda", f"{p}.cuda", pattern=VERSION_ANY, example="12.3", optional=True)
    if cuda is not None and not VERSION2.match(cuda):
        c.fail(c.line_of(row, "cuda"), f"{p}.cuda", f'expected a version string like "12.3", got {cuda!r}',
               "give CUDA as major.minor; put a finer version in build_info")
    sources = c.str_map(row, "sources", f"{p}.sources")
    source = s(row, "source", f"{p}.source") or ""
    return Release(
        tensorflow=tf,
        package=s(row, "package", f"{p}.package", choices=("tensorflow", "tensorflow-gpu")) or "",
        released=s(row, "released", f"{p}.released", pattern=DATE, example="2024-03-08", optional=True),
        pythons=c.strings(row, "pythons", f"{p}.pythons", pattern=VERSION2, example="3.11"),
        cuda=cuda,
        cudnn=s(row, "cudnn", f"{p}.cudnn", pattern=VERSION_ANY, example="8.9", optional=True),
        sass=c.strings(row, "sass", f"{p}.sass", pattern=VERSION2, example="8.0"),
        ptx=c.strings(row, "ptx", f"{p}.ptx", pattern=VERSION2, example="9.0"),
        min_glibc=s(row, "min_glibc", f"{p}.min_glibc", pattern=VERSION2, example="2.17") or "",
        manylinux=s(row, "manylinux", f"{p}.manylinux") or "",
        cuda_from=cuda_from,
        extra=extra,
        pins=pins,
        constraints=_projects(c, row, "constraints", p, c.str_map(row, "constraints", f"{p}.constraints"), True),
        defects=tuple(defects),
        sources={"row": source, **sources},
        unconfirmed=unconfirmed,
        arches=c.strings(row, "arches", f"{p}.arches") or ("x86_64",),
        notes=s(row, "notes", f"{p}.notes", optional=True),
        line=row.line,
        source=source,
        pins_kind=pins_kind,
        extra_requires=_projects(c, row, "extra_requires", p, c.str_map(row, "extra_requires", f"{p}.extra_requires"),
                                 True),
        build_info={str(k): str(v) for k, v in (row.get("build_info") or {}).items()},
        pin_hashes=_pin_hashes(c, row, p, pins),
        sonames=c.strings(row, "sonames", f"{p}.sonames"),
        first_seen=s(row, "first_seen", f"{p}.first_seen", pattern=DATE, example="2026-09-22", optional=True),
    )


_SHA256 = re.compile(r"^sha256:[0-9a-f]{64}$")


def _projects(c: Checker, row: LDict, key: str, p: str, found: dict[str, str],
              specifiers: bool = False) -> dict[str, str]:
    """A map keyed by project names (PEP 503/508 names only: `name @ url` would make the
    installer fetch code from that URL), its values version specifiers when `specifiers`."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    from tfgpu_install.guard.names import is_project

    for name, value in found.items():
        if not is_project(name):
            c.fail(c.line_of(row, key), f"{p}.{key}", f"{name[:80]!r} is not a project name (no URL, extra or marker)",
                   "use the plain PyPI name, e.g. nvidia-cudnn-cu12")
        if specifiers:
            try:
                SpecifierSet(value)
            except InvalidSpecifier:
                c.fail(c.line_of(row, key), f"{p}.{key}.{name}", f"{value[:80]!r} is not a version specifier",
                       "write specifiers like '>=1.26,<2'")
    return found


def _pin_hashes(c: Checker, row: LDict, p: str, pins: dict[str, str]) -> dict[str, str]:
    """pin -> "sha256:<hex>" of the Linux x86_64 wheel; only for pinned packages."""
    hashes = c.str_map(row, "pin_hashes", f"{p}.pin_hashes")
    for name, digest in hashes.items():
        if name not in pins or not _SHA256.match(digest):
            c.fail(c.line_of(row, "pin_hashes"), f"{p}.pin_hashes.{name}",
                   f"expected sha256:<64 hex> of a pinned wheel, got {digest!r}",
                   "copy it from `pip install --dry-run --report` (download_info.archive_info.hashes)")
    return hashes


def parse_drivers(path: Path, label: str) -> tuple[tuple[DriverRow, ...], tuple[MinorCompatRow, ...]]:
    c = Checker(label)
    top = _top(c, read_yaml(path, label), "cuda", ("minor_compat", "format", "architectures", "ptxas"))
    rows = c.seq(top["cuda"], "cuda", c.line_of(top, "cuda"))
    drivers = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(rows):
        p = f"cuda[{i}]"
        row = c.mapping(raw, p, c.line_of(rows, i), ("cuda", "min_driver", "source"), ("label",))
        cuda = c.string(row, "cuda", f"{p}.cuda", pattern=VERSION2, example="12.2") or ""
        if cuda in seen:
            c.fail(row.line, f"{p}.cuda", f"duplicate CUDA {cuda} (first at line {seen[cuda]})")
        seen[cuda] = row.line
        drivers.append(DriverRow(
            cuda=cuda,
            min_driver=c.string(row, "min_driver", f"{p}.min_driver", pattern=DRIVER, example="535.54.03") or "",
            source=c.string(row, "source", f"{p}.source") or "",
            label=c.string(row, "label", f"{p}.label", optional=True) or "",
            line=row.line,
        ))
    minor = []
    mrows = c.seq(top.get("minor_compat") or [], "minor_compat", c.line_of(top, "minor_compat"))
    for i, raw in enumerate(mrows):
        p = f"minor_compat[{i}]"
        row = c.mapping(raw, p, c.line_of(mrows, i), ("cuda_major", "min_driver", "source"), ("caveat",))
        major = row.get("cuda_major")
        if isinstance(major, int) and not isinstance(major, bool):
            major = str(major)
            row["cuda_major"] = major
        minor.append(MinorCompatRow(
            cuda_major=c.string(row, "cuda_major", f"{p}.cuda_major", example="12") or "",
            min_driver=c.string(row, "min_driver", f"{p}.min_driver", pattern=DRIVER, example="525.60.13") or "",
            source=c.string(row, "source", f"{p}.source") or "",
            caveat=c.string(row, "caveat", f"{p}.caveat", optional=True) or "",
        ))
    return tuple(drivers), tuple(minor)


def parse_hardware(path: Path, label: str) -> tuple[tuple[ArchRow, ...], tuple[PtxasRow, ...]]:
    """drivers.yaml's `architectures` (driver ceilings) and `ptxas` (highest target) tables."""
    c = Checker(label)
    top = _top(c, read_yaml(path, label), "cuda", ("minor_compat", "format", "architectures", "ptxas"))
    archs = []
    arows = c.seq(top.get("architectures") or [], "architectures", c.line_of(top, "architectures"))
    for i, raw in enumerate(arows):
        p = f"architectures[{i}]"
        row = c.mapping(raw, p, c.line_of(arows, i), ("architecture", "cc_min", "cc_max", "last_branch", "source"))
        branch = c.string(row, "last_branch", f"{p}.last_branch", pattern=re.compile(r"^\d{3}$"), example="470") or "0"
        archs.append(ArchRow(
            architecture=c.string(row, "architecture", f"{p}.architecture") or "",
            cc_min=c.string(row, "cc_min", f"{p}.cc_min", pattern=VERSION2, example="3.0") or "",
            cc_max=c.string(row, "cc_max", f"{p}.cc_max", pattern=VERSION2, example="3.7") or "",
            last_branch=int(branch), source=c.string(row, "source", f"{p}.source") or "", line=row.line,
        ))
    ptxas = []
    prows = c.seq(top.get("ptxas") or [], "ptxas", c.line_of(top, "ptxas"))
    for i, raw in enumerate(prows):
        p = f"ptxas[{i}]"
        row = c.mapping(raw, p, c.line_of(prows, i), ("ptxas", "highest_cc", "source"), ("wheel", "sha256", "adds"))
        ptxas.append(PtxasRow(
            ptxas=c.string(row, "ptxas", f"{p}.ptxas", pattern=VERSION2, example="12.8") or "",
            highest_cc=c.string(row, "highest_cc", f"{p}.highest_cc", pattern=VERSION2, example="12.0") or "",
            source=c.string(row, "source", f"{p}.source") or "", line=row.line,
            adds=c.strings(row, "adds", f"{p}.adds", pattern=VERSION2, example="12.0"),
            wheel=c.string(row, "wheel", f"{p}.wheel", optional=True,
                           pattern=re.compile(r"^nvidia-cuda-nvcc-cu\d+==[\d.]+$"),
                           example="nvidia-cuda-nvcc-cu12==12.8.93") or "",
            sha256=c.string(row, "sha256", f"{p}.sha256", optional=True, pattern=_SHA256,
                            example="sha256:<64 hex>") or "",
        ))
    return tuple(archs), tuple(ptxas)


def parse_gpus(path: Path, label: str) -> tuple[GpuRow, ...]:
    """gpus.yaml groups models by (compute capability, architecture, source)."""
    c = Checker(label)
    top = _top(c, read_yaml(path, label), "groups", ("format",))
    groups = c.seq(top["groups"], "groups", c.line_of(top, "groups"))
    out: list[GpuRow] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(groups):
        p = f"groups[{i}]"
        g = c.mapping(raw, p, c.line_of(groups, i), ("compute_capability", "source", "gpus"),
                      ("architecture", "notes"))
        cc = c.string(g, "compute_capability", f"{p}.compute_capability", pattern=VERSION2, example="8.6") or ""
        source = c.string(g, "source", f"{p}.source") or ""
        arch = c.string(g, "architecture", f"{p}.architecture", optional=True)
        models = c.seq(g["gpus"], f"{p}.gpus", c.line_of(g, "gpus"))
        for j, m in enumerate(models):
            mp = f"{p}.gpus[{j}]"
            line = c.line_of(models, j)
            aliases: tuple[str, ...] = ()
            if isinstance(m, str):
                name = m
            else:
                mm = c.mapping(m, mp, line, ("name",), ("aliases",))
                name = c.string(mm, "name", f"{mp}.name") or ""
                aliases = c.strings(mm, "aliases", f"{mp}.aliases")
            key = name.lower()
            if key in seen:
                c.fail(line, mp, f"duplicate GPU {name!r} (first at line {seen[key]})")
            seen[key] = line
            out.append(GpuRow(name=name, compute_capability=cc, source=source, aliases=aliases,
                              architecture=arch))
    return tuple(out)


POLICY_KEYS = ("name", "description", "prefer", "source")
POLICY_OPTIONAL = ("require_patch_release", "min_age_days", "tensorflow", "allow_defects", "cuda_from",
                   "jit_only_ok", "format", "learned", "prereleases")


def parse_policy(path: Path, label: str, expect_name: Optional[str] = None) -> Policy:
    c = Checker(label)
    data = read_yaml(path, label)
    if data is None:
        c.fail(1, "(file)", "the file is empty", "a policy needs name, description, prefer and source")
    top = c.mapping(data, "", 1, POLICY_KEYS, POLICY_OPTIONAL)
    name = c.string(top, "name", "name") or ""
    if expect_name and name != expect_name:
        c.fail(c.line_of(top, "name"), "name", f"expected {expect_name!r} (the file's name), got {name!r}")
    spec = c.string(top, "tensorflow", "tensorflow", optional=True)
    if spec is not None:
        from packaging.specifiers import InvalidSpecifier, SpecifierSet

        try:
            SpecifierSet(spec)
        except InvalidSpecifier:
            c.fail(c.line_of(top, "tensorflow"), "tensorflow", f"not a version specifier: {spec!r}",
                   'write it like ">=2.12,<2.18"')
    cuda_from = c.strings(top, "cuda_from", "cuda_from") or ("pip", "system")
    for j, v in enumerate(cuda_from):
        if v not in ("pip", "system"):
            c.fail(c.line_of(top["cuda_from"], j), f"cuda_from[{j}]", f"expected pip or system, got {v!r}")
    return Policy(
        name=name,
        description=c.string(top, "description", "description") or "",
        prefer=c.string(top, "prefer", "prefer", choices=("newest", "oldest")) or "newest",
        require_patch_release=c.boolean(top, "require_patch_release", "require_patch_release", False),
        min_age_days=c.integer(top, "min_age_days", "min_age_days", 0),
        tensorflow=spec,
        allow_defects=c.boolean(top, "allow_defects", "allow_defects", False),
        source=c.string(top, "source", "source") or "",
        cuda_from=cuda_from,
        jit_only_ok=c.boolean(top, "jit_only_ok", "jit_only_ok", True),
        learned=c.string(top, "learned", "learned", optional=True, choices=("any", "settled", "never")) or "settled",
        path=str(path),
        prereleases=c.boolean(top, "prereleases", "prereleases", False),
    )


FLOOR_KEYS = ("library", "from", "min_cc", "source")
FAILURE_KEYS = ("id", "tensorflow", "cc_min", "cc_max", "text", "sources")


def parse_kernels(path: Path, label: str) -> tuple[tuple[FloorRow, ...], tuple[KnownFailure, ...]]:
    """kernels.yaml: library floors (the lowest compute capability a release has kernels for) and known
    failures of TensorFlow release ranges on compute capabilities."""
    c = Checker(label)
    top = _top(c, read_yaml(path, label), "floors", ("known_failures", "format"))
    floors = []
    rows = c.seq(top["floors"], "floors", c.line_of(top, "floors"))
    for i, raw in enumerate(rows):
        p = f"floors[{i}]"
        row = c.mapping(raw, p, c.line_of(rows, i), FLOOR_KEYS, ("last", "wheel", "sha256"))
        floors.append(FloorRow(
            library=c.string(row, "library", f"{p}.library", choices=("cudnn", "cuda")) or "",
            since=c.string(row, "from", f"{p}.from", pattern=VERSION_ANY, example="9.11") or "",
            min_cc=c.string(row, "min_cc", f"{p}.min_cc", pattern=VERSION2, example="7.5") or "",
            source=c.string(row, "source", f"{p}.source") or "",
            last=c.string(row, "last", f"{p}.last", pattern=VERSION_ANY, example="9.10.2.21", optional=True) or "",
            wheel=c.string(row, "wheel", f"{p}.wheel", optional=True,
                           pattern=re.compile(r"^nvidia-cudnn-cu\d+==[\d.]+$"),
                           example="nvidia-cudnn-cu12==9.10.2.21") or "",
            sha256=c.string(row, "sha256", f"{p}.sha256", optional=True, pattern=_SHA256,
                            example="sha256:<64 hex>") or "",
            line=row.line,
        ))
    failures = []
    rows = c.seq(top.get("known_failures") or [], "known_failures", c.line_of(top, "known_failures"))
    for i, raw in enumerate(rows):
        p = f"known_failures[{i}]"
        row = c.mapping(raw, p, c.line_of(rows, i), FAILURE_KEYS, ("runs_instead", "unless_sass", "inferred"))
        failures.append(KnownFailure(
            id=c.string(row, "id", f"{p}.id", pattern=re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$"),
                        example="blackwell-ptx-jit") or "",
            tensorflow=_specifier(c, row, f"{p}.tensorflow"),
            cc_min=c.string(row, "cc_min", f"{p}.cc_min", pattern=VERSION2, example="12.0") or "",
            cc_max=c.string(row, "cc_max", f"{p}.cc_max", pattern=VERSION2, example="12.0") or "",
            text=c.string(row, "text", f"{p}.text") or "",
            sources=c.strings(row, "sources", f"{p}.sources"),
            runs_instead=c.strings(row, "runs_instead", f"{p}.runs_instead"),
            unless_sass=c.boolean(row, "unless_sass", f"{p}.unless_sass", True),
            inferred=c.boolean(row, "inferred", f"{p}.inferred", False),
            line=row.line,
        ))
        if not failures[-1].sources:
            c.fail(row.line, f"{p}.sources", "a known failure needs its public sources", "list issue or note URLs")
    return tuple(floors), tuple(failures)


def _specifier(c: Checker, row: LDict, path: str) -> str:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    spec = c.string(row, "tensorflow", path) or ""
    try:
        SpecifierSet(spec)
    except InvalidSpecifier:
        c.fail(c.line_of(row, "tensorflow"), path, f"not a version specifier: {spec!r}", 'write it like "<2.22"')
    return spec
