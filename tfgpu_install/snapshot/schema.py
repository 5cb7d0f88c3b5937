"""The snapshot document's schema: a type check of reader.py's Node tree with file:line errors.

check() validates the tree against the format (1 or 2) and returns the typed Snapshot
(snapshot/document.py), so nothing after it re-checks a type: strings without NUL bytes and of
bounded length, library and activation paths inside the env, an id that is a plain file name. Plain dicts (tests,
bundle manifests) go through reader.node_of() and the same check, without line numbers.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Iterable, Mapping, NoReturn, Optional

from tfgpu_install.conda.prefix import CondaRecord
from tfgpu_install.guard import names
from tfgpu_install.guard.jsondoc import JSONObject
from tfgpu_install.resolver.model import Choice, Rejection, Resolution
from tfgpu_install.snapshot.document import (
    EnvRecord,
    FileRecord,
    HostContract,
    Package,
    RecordedResolution,
    Snapshot,
    Verification,
)
from tfgpu_install.snapshot.reader import HINT, MAX_SCALAR, Node, bad, node_of

MAX_PATH = 4096
ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")  # a file name in the store: no '/', no '..'


# --- checking ------------------------------------------------------------------------------


def _kind(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return f"a number ({value!r})"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


class Check:
    """Typed access to a Node tree; every failure is BAD_INPUT '<where>:<line>: <path>: ...'."""

    def __init__(self, where: str) -> None:
        self.where = where

    def fail(self, node: Node, path: str, what: str, hint: str = HINT) -> NoReturn:
        bad(self.where, node.line, f"{path}: {what}" if path else what, hint)

    def expect(self, node: Node, path: str, expected: str) -> NoReturn:
        self.fail(node, path, f"expected {expected}, found {_kind(node.value)}")

    def mapping(self, node: Node, path: str, required: Iterable[str] = ()) -> dict[str, Node]:
        if not isinstance(node.value, dict):
            self.expect(node, path, "a mapping")
        dup = getattr(node.value, "duplicate", None)
        if dup is not None:
            bad(self.where, dup[1], f"{_join(path, dup[0])}: duplicate key", "remove one of the two entries")
        for key in required:
            if key not in node.value:
                self.fail(node, path, f"missing key '{key}'", "the file is not a complete tfgpu-install snapshot; "
                          "export it again")
        return node.value

    def seq(self, node: Node, path: str, what: str = "a list") -> list[Node]:
        if not isinstance(node.value, list):
            self.expect(node, path, what)
        return node.value

    def text(self, node: Node, path: str, *, null: bool = False, pattern: Optional["re.Pattern[str]"] = None,
             example: str = "", limit: int = MAX_PATH) -> Optional[str]:
        value = node.value
        if value is None and null:
            return None
        if not isinstance(value, str):
            like = f' like "{example}"' if example else ""
            hint = (f'quote it: "{value}" (YAML reads an unquoted 12.10 as the number 12.1)'
                    if isinstance(value, (int, float)) and not isinstance(value, bool) else HINT)
            self.fail(node, path, f"expected a string{like}" + (" or null" if null else "")
                      + f", found {_kind(value)}", hint)
        self._clean(node, path, value, limit)
        if pattern is not None and not pattern.fullmatch(value):
            self.fail(node, path, f"expected something like {example!r}, found {value[:60]!r}")
        return value

    def _clean(self, node: Node, path: str, value: str, limit: int) -> None:
        if "\x00" in value:
            self.fail(node, path, "contains a NUL byte: not a valid path or name")
        if len(value) > limit:
            self.fail(node, path, f"a string of {len(value)} characters ({limit} at most)")

    def typed(self, node: Node, path: str, kind: str, *, null: bool = False) -> Optional[str]:
        """A string of one strict kind: "project" (a PEP 503/508 name: no `name @ url`, no extras
        or markers), "version" (PEP 440), "sha256" (sha256:<64 hex>), "hex64" (a bare digest)."""
        value = self.text(node, path, null=null, limit=200)
        if value is None:
            return None
        ok, what = _KINDS[kind]
        if not ok(value):
            self.fail(node, path, f"expected {what}, found {names.printable(value[:80])!r}",
                      "a snapshot holds plain names, versions and hashes only; export it again")
        return value

    def integer(self, node: Node, path: str) -> int:
        value = node.value
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            self.fail(node, path, f"expected a whole number >= 0, found {_kind(value)}")
        return value

    def boolean(self, node: Node, path: str) -> bool:
        if not isinstance(node.value, bool):
            self.expect(node, path, "true or false")
        return node.value

    def strings(self, node: Node, path: str, limit: int = MAX_PATH) -> list[str]:
        return [self.text(item, f"{path}[{i}]", limit=limit) or ""
                for i, item in enumerate(self.seq(node, path, "a list of strings"))]

    def str_map(self, node: Node, path: str, limit: int = MAX_PATH) -> dict[str, str]:
        out: dict[str, str] = {}
        for key, item in self.mapping(node, path).items():
            self._clean(item, _join(path, key), key, MAX_PATH)
            out[key] = self.text(item, _join(path, key), limit=limit) or ""
        return out

    def plain(self, node: Node, path: str) -> Any:
        """Free-form data (verification details, resolution reasons): any shape, NUL-free strings."""
        value = node.value
        if isinstance(value, dict):
            self.mapping(node, path)
            return {k: self.plain(v, _join(path, k)) for k, v in value.items()}
        if isinstance(value, list):
            return [self.plain(v, f"{path}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, str):
            self._clean(node, path, value, MAX_SCALAR)
        return value


def _specifiers(text: str) -> bool:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        SpecifierSet(text)
    except InvalidSpecifier:
        return False
    return True


_KINDS = {
    "project": (names.is_project,
                "a project name like 'numpy' (letters, digits, '.', '-', '_'; no URL, extra or marker)"),
    "version": (names.is_version, "a PEP 440 version like '2.17.1'"),
    "sha256": (names.is_sha256, "a hash like 'sha256:<64 lowercase hex digits>'"),
    "hex64": (lambda v: bool(names.HEX64.fullmatch(v)), "a sha256 digest (64 lowercase hex digits)"),
    "specifiers": (_specifiers, "version specifiers like '>=1.26,<2'"),
}


def _join(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)


# --- the formats ---------------------------------------------------------------------------


def check(root: Node, where: str) -> Snapshot:
    """Validate a snapshot document into the typed Snapshot."""
    c = Check(where)
    top = c.mapping(root, "", ())
    if "format" not in top:
        c.fail(root, "", "missing key 'format': not a tfgpu-install snapshot",
               "pass a file written by `tfgpu-install snapshot export`")
    fmt = top["format"].value
    if fmt == 1 and not isinstance(fmt, bool):
        return _check_v1(c, top)
    if fmt == 2 and not isinstance(fmt, bool):
        return _check_v2(c, root, top)
    c.fail(top["format"], "format", f"snapshot format {fmt!r} is not one this version reads (1, 2)",
           "upgrade tfgpu-install to read newer snapshots")


def _opt_text(c: Check, m: dict[str, Node], key: str, path: str, **kw: Any) -> Optional[str]:
    return c.text(m[key], _join(path, key), null=True, **kw) if key in m else None


def _env(c: Check, node: Node) -> EnvRecord:
    m = c.mapping(node, "env")
    known: dict[str, Optional[str]] = {}
    conda: Optional[tuple[CondaRecord, ...]] = None
    other = []
    for key, item in m.items():
        if key == "conda_packages" and item.value is not None:
            conda = tuple(_conda_record(c, r, f"env.conda_packages[{i}]")
                          for i, r in enumerate(c.seq(item, "env.conda_packages")))
            continue
        value = c.text(item, f"env.{key}", null=True)
        if key in ("path", "backend", "python"):
            known[key] = value
        elif key != "conda_packages":
            other.append((key, value))
    return EnvRecord(**known, conda_packages=conda, other=tuple(other), keys=tuple(m))


_CONDA_NAME = re.compile(r"[a-z0-9_][a-z0-9_.+-]{0,199}")
_CONDA_WORD = re.compile(r"[A-Za-z0-9_.+!]{1,200}")  # a conda version or build string
_CHANNEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}(/[A-Za-z0-9][A-Za-z0-9_.-]{0,99})?")


def _conda_record(c: Check, node: Node, path: str) -> CondaRecord:
    """One conda package of a conda env: a restore pins name=version=build from channel, so each
    is a strict word; the channel is a plain name (conda-forge) or an https URL."""
    m = c.mapping(node, path, ("name", "version", "build"))
    out = {}
    for key, pattern in (("name", _CONDA_NAME), ("version", _CONDA_WORD), ("build", _CONDA_WORD)):
        out[key] = c.text(m[key], _join(path, key), pattern=pattern, example={"name": "cudatoolkit",
                          "version": "11.8.0", "build": "h6a678d5_0"}[key]) or ""
    channel = (c.text(m["channel"], _join(path, "channel"), null=True) if "channel" in m else None) or ""
    if channel and not _CHANNEL_NAME.fullmatch(channel) and names.url_problem(channel) is not None:
        c.fail(m["channel"], _join(path, "channel"), f"expected a channel name or an https URL, found "
               f"{names.printable(channel[:80])!r} ({names.url_problem(channel)})",
               "a snapshot never chooses where packages come from over plain http; export it again")
    out["channel"] = channel
    digest = (c.text(m["sha256"], _join(path, "sha256"), null=True) if "sha256" in m else None) or ""
    if digest:
        c.typed(m["sha256"], _join(path, "sha256"), "hex64")
    out["sha256"] = digest
    return CondaRecord(**out)


_CHOICE_TEXT = ("cuda_from", "python_path", "visible_devices")
# The default restore target is named from these: versions only, never a path.
_CHOICE_VERSIONS = ("tensorflow", "cuda", "cudnn", "python")


def _choice_fields(c: Check, m: dict[str, Node], path: str) -> None:
    """The fields choice_of()/restore read: right (strict) types where present."""
    for key in _CHOICE_TEXT:
        if key in m:
            c.text(m[key], _join(path, key), null=True)
    for key in _CHOICE_VERSIONS:
        if key in m:
            c.typed(m[key], _join(path, key), "version", null=True)
    if "package" in m:
        c.typed(m["package"], _join(path, "package"), "project", null=True)
    for key in ("jit_only", "cpu_only"):
        if key in m and m[key].value is not None:
            c.boolean(m[key], _join(path, key))
    for key, kind in (("pins", "version"), ("constraints", "specifiers")):
        if key in m and m[key].value is not None:
            for name, item in c.mapping(m[key], _join(path, key)).items():
                where = _join(_join(path, key), name)
                c.typed(Node(item.line or m[key].line, name), where, "project")
                c.typed(item, where, kind)
    if _present(m, "hashes"):  # pin -> ["sha256:..."]
        for name, item in c.mapping(m["hashes"], _join(path, "hashes")).items():
            where = _join(_join(path, "hashes"), name)
            c.typed(Node(item.line or m["hashes"].line, name), where, "project")
            for i, digest in enumerate(c.seq(item, where, "a list of hashes")):
                c.typed(digest, f"{where}[{i}]", "sha256")
    if _present(m, "sonames"):
        c.strings(m["sonames"], _join(path, "sonames"), limit=200)


def _resolver_fields(c: Check, m: dict[str, Node], path: str) -> None:
    """The rest of what Resolution.to_json() writes: right types where present."""
    if "profile" in m:
        c.text(m["profile"], _join(path, "profile"), null=True, limit=200)
    for key in ("reasons", "options", "remedies", "warnings"):
        if _present(m, key):
            c.strings(m[key], _join(path, key), MAX_SCALAR)
    if _present(m, "rejected"):
        for i, item in enumerate(c.seq(m["rejected"], _join(path, "rejected"))):
            where = f"{_join(path, 'rejected')}[{i}]"
            r = c.mapping(item, where, ("tensorflow",))
            c.text(r["tensorflow"], _join(where, "tensorflow"), limit=200)
            if _present(r, "reasons"):
                c.strings(r["reasons"], _join(where, "reasons"), MAX_SCALAR)
            if "summary" in r:
                c.text(r["summary"], _join(where, "summary"), null=True, limit=MAX_SCALAR)


def _resolution(c: Check, node: Node, path: str = "resolution") -> RecordedResolution:
    return recorded_resolution(_checked_resolution(c, node, path))


def checked_resolution(block: object, where: str) -> RecordedResolution:
    """A resolution block from plain data (a journaled plan): checked as a snapshot's, then typed."""
    return _resolution(Check(where), node_of(block))


def _checked_resolution(c: Check, node: Node, path: str) -> JSONObject:
    if node.value is None:
        return {}
    m = c.mapping(node, path)
    _choice_fields(c, m, path)
    _resolver_fields(c, m, path)
    if "choice" in m and m["choice"].value is not None:
        _choice_fields(c, c.mapping(m["choice"], f"{path}.choice"), f"{path}.choice")
    if "resolution" in m and path == "resolution":  # a journaled plan: {"resolution": {...}, "options"}
        _checked_resolution(c, m["resolution"], f"{path}.resolution")
    _added(c, m, path)
    return c.plain(node, path)  # type: ignore[no-any-return]


def _opt(value: Any) -> Optional[str]:
    return None if value is None else str(value)


def _choice(d: Mapping[str, Any]) -> Choice:
    """The resolver's Choice from a checked block (a field it lacks: the type's empty value)."""
    return Choice(
        tensorflow=str(d.get("tensorflow") or ""), cuda=_opt(d.get("cuda")), cudnn=_opt(d.get("cudnn")),
        python=str(d.get("python") or ""), jit_only=bool(d.get("jit_only")),
        package=str(d.get("package") or "tensorflow"), python_path=_opt(d.get("python_path")),
        cuda_from=str(d.get("cuda_from") or "pip"), pins={str(k): str(v) for k, v in (d.get("pins") or {}).items()},
        constraints={str(k): str(v) for k, v in (d.get("constraints") or {}).items()},
        visible_devices=_opt(d.get("visible_devices")),
        hashes={str(k): [str(h) for h in v] for k, v in (d.get("hashes") or {}).items()},
        sonames=[str(s) for s in d.get("sonames") or ()],
    )


_FLAT = ("tensorflow", "cuda", "cudnn", "python", "package", "pins", "constraints", "cuda_from", "jit_only")


def recorded_resolution(block: Mapping[str, Any]) -> RecordedResolution:
    """A resolution block (checked by this module, or the tool's own) as its types: the shape
    Resolution.to_json() + "added" writes; a journaled plan's ({"resolution": {...}, "options"});
    format 1's flat combination. A block to_json() would not write back the same is kept as read."""
    inner = block.get("resolution")
    res = inner if isinstance(inner, Mapping) else block
    raw = res.get("choice")
    choice = _choice(raw) if isinstance(raw, Mapping) else _choice(res) if any(k in res for k in _FLAT) else None
    resolution = Resolution(
        profile=str(res.get("profile") or ""), choice=choice, reasons=tuple(str(r) for r in res.get("reasons") or ()),
        rejected=tuple(Rejection(str(r.get("tensorflow")), tuple(str(x) for x in r.get("reasons") or ()),
                                 str(r.get("summary") or "")) for r in res.get("rejected") or ()),
        options=tuple(str(o) for o in res.get("options") or ()),
        remedies=tuple(str(r) for r in res.get("remedies") or ()),
        warnings=tuple(str(w) for w in res.get("warnings") or ()), cpu_only=bool(res.get("cpu_only")),
    ) if res else None
    typed = RecordedResolution(resolution, tuple(str(a) for a in block.get("added") or ()))
    return typed if typed.to_json() == dict(block) else replace(typed, as_read=dict(block))


# --- resolution.added (issue #29: the user's own requirements, --with / add) ----------------
def _added(c: Check, m: dict[str, Node], path: str) -> None:
    """resolution.added: a list of requirement strings (each checked again where it is used,
    plan/additions.from_record); absent or null when the user added none."""
    if "added" in m and m["added"].value is not None:
        for i, item in enumerate(c.seq(m["added"], _join(path, "added"))):
            c.text(item, f"{_join(path, 'added')}[{i}]", limit=1000)


def _host(c: Check, node: Node) -> HostContract:
    m = c.mapping(node, "host")
    gpus = []
    if "gpus" in m and m["gpus"].value is not None:
        for i, g in enumerate(c.seq(m["gpus"], "host.gpus")):
            gm = c.mapping(g, f"host.gpus[{i}]")
            gpus.append({k: c.text(v, f"host.gpus[{i}].{k}", null=True) for k, v in gm.items()})
    return HostContract(**{k: _opt_text(c, m, k, "host") for k in ("driver", "max_cuda", "glibc", "arch", "os")},
                        gpus=tuple(gpus))


def _package(c: Check, node: Node, path: str) -> Package:
    m = c.mapping(node, path, ("name", "version"))
    hashes = [c.typed(h, f"{path}.hashes[{i}]", "sha256") or ""
              for i, h in enumerate(c.seq(m["hashes"], f"{path}.hashes", "a list of strings"))] \
        if "hashes" in m and m["hashes"].value is not None else []
    # what its files must be (env/builds.py); absent in older snapshots
    content = c.typed(m["content"], f"{path}.content", "sha256") if _present(m, "content") else None
    return Package(c.typed(m["name"], f"{path}.name", "project") or "",
                   c.typed(m["version"], f"{path}.version", "version") or "", tuple(hashes), content)


def _relative(c: Check, node: Node, path: str) -> str:
    value = c.text(node, path) or ""
    if value.startswith("/") or ".." in value.split("/") or not value:
        c.fail(node, path, f"expected a path inside the env (relative, no '..'), found {value[:80]!r}")
    return value


def _file(c: Check, node: Node, path: str) -> FileRecord:
    m = c.mapping(node, path, ("path", "sha256", "size"))
    return FileRecord(_relative(c, m["path"], f"{path}.path"), c.typed(m["sha256"], f"{path}.sha256", "hex64") or "",
                      c.integer(m["size"], f"{path}.size"),
                      c.integer(m["mtime_ns"], f"{path}.mtime_ns") if "mtime_ns" in m else 0)


def _present(m: dict[str, Node], key: str) -> bool:
    return key in m and m[key].value is not None


def _check_v2(c: Check, root: Node, top: dict[str, Node]) -> Snapshot:
    c.mapping(root, "", ("id", "env", "host", "packages"))
    activation = c.str_map(top["activation"], "activation", MAX_SCALAR) if _present(top, "activation") else {}
    snap = Snapshot(
        format=2,
        id=c.text(top["id"], "id", pattern=ID, example="20261201T000000Z-known-good-1a2b3c") or "",
        kind=_opt_text(c, top, "kind", "", limit=100) or "export",
        created=_opt_text(c, top, "created", "", limit=100) or "",
        tool=_opt_text(c, top, "tool", "", limit=200) or "",
        env=_env(c, top["env"]),
        host=_host(c, top["host"]),
        resolution=_resolution(c, top["resolution"]) if "resolution" in top else RecordedResolution(),
        packages=tuple(_package(c, p, f"packages[{i}]") for i, p in enumerate(c.seq(top["packages"], "packages"))),
        files=tuple(_file(c, f, f"files[{i}]") for i, f in enumerate(c.seq(top["files"], "files")))
        if _present(top, "files") else (),
        activation=activation,
        verification=_verification(c, top["verification"]) if _present(top, "verification") else None,
        notes=tuple(c.strings(top["notes"], "notes", MAX_SCALAR)) if _present(top, "notes") else (),
    )
    for key in activation:
        _relative(c, Node(top["activation"].line, key), f"activation.{key}")
    return snap


_VERIFICATION_FLAGS = ("ok", "gpu_verified")
_VERIFICATION_TEXT = ("verified_at", "mode", "record")


def _verification(c: Check, node: Node) -> Verification:
    """The verification block: its flags and texts typed, the check's report a mapping (kept as written)."""
    m = c.mapping(node, "verification")
    for key in _VERIFICATION_FLAGS:
        if key in m and m[key].value is not None:
            c.boolean(m[key], f"verification.{key}")
    for key in _VERIFICATION_TEXT:
        if key in m:
            c.text(m[key], f"verification.{key}", null=True)
    if "report" in m and m["report"].value is not None:
        c.mapping(m["report"], "verification.report")
    return verification_of(c.plain(node, "verification"))


def verification_of(block: Mapping[str, Any]) -> Verification:
    """A verification block (checked by this module, or the tool's own) as its type."""
    def flag(key: str) -> Optional[bool]:
        return None if block.get(key) is None else bool(block.get(key))

    report = block.get("report")
    known = set(_VERIFICATION_FLAGS + _VERIFICATION_TEXT) | {"report"}
    return Verification(
        ok=flag("ok"), gpu_verified=flag("gpu_verified"),
        **{k: _opt(block.get(k)) for k in _VERIFICATION_TEXT},
        report=dict(report) if isinstance(report, Mapping) else None,
        other=tuple((k, v) for k, v in block.items() if k not in known), keys=tuple(block),
    )


def _mapping_node(c: Check, m: dict[str, Node], key: str) -> Node:
    """m[key], which must be a mapping."""
    c.mapping(m[key], key)
    return m[key]


def _check_v1(c: Check, top: dict[str, Node]) -> Snapshot:
    """Format 1: {format: 1, env: PATH | {...}, resolution, packages: ["name==version" | {name, version}]}."""
    env = EnvRecord()
    if _present(top, "env"):
        env = EnvRecord(path=c.text(top["env"], "env"), keys=("path",)) if isinstance(top["env"].value, str) \
            else _env(c, top["env"])
    packages: list[Package] = []
    if _present(top, "packages"):
        for i, item in enumerate(c.seq(top["packages"], "packages")):
            path = f"packages[{i}]"
            if isinstance(item.value, str):
                text = c.text(item, path) or ""
                if "==" not in text:
                    c.fail(item, path, f"expected 'name==version', found {text[:60]!r}")
                name, version = text.split("==", 1)
                packages.append(Package(c.typed(Node(item.line, name.strip()), path, "project") or "",
                                        c.typed(Node(item.line, version.strip()), path, "version") or ""))
            else:
                m = c.mapping(item, path, ("name",))
                packages.append(Package(c.typed(m["name"], f"{path}.name", "project") or "",
                                        (c.typed(m["version"], f"{path}.version", "version", null=True)
                                         if "version" in m else None) or ""))
    return Snapshot(
        format=1,
        id=(c.text(top["id"], "id", null=True, pattern=ID, example="legacy") if "id" in top else None) or "legacy",
        kind=_opt_text(c, top, "kind", "", limit=100) or "rollback-point",
        created=_opt_text(c, top, "created", "", limit=100) or "",
        tool=_opt_text(c, top, "tool", "", limit=200) or "",
        env=env,
        host=HostContract(),
        resolution=_resolution(c, top["resolution"]) if "resolution" in top else RecordedResolution(),
        packages=tuple(packages),
        verification=_verification(c, top["verification"]) if _present(top, "verification") else None,
        notes=("loaded from format 1: no host contract and no hashes",),
    )
