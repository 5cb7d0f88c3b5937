#!/usr/bin/env python3
"""Benchmark: provisioning with tfgpu-install against pip and uv, side by side.

    scripts/bench.py --quick [--reps N] [--out DIR]    the tests' local wheelhouse (minutes)
    scripts/bench.py [--allow-cpu] [--reps N]          the real registry (TensorFlow's pins, GBs)

Every measure runs its contenders interleaved (A B C, B C A, C A B ...) so drift in the
machine (page cache, CPU frequency, the network) spreads over all of them. It reports the
median and min/max of each, ratios within the run (ours / uv, ours / python start) against the
targets of issue 15 (in the markdown and, as "targets", in the JSON), a markdown table and a JSON
file (default bench-results/, git-ignored).
It never fails on a time: only a command that fails makes the exit status 1.
Run it with the interpreter that has the tool installed (e.g. .venv-test/bin/python).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

REPO = Path(__file__).resolve().parents[1]
CONTENDERS = ("ours", "uv", "pip")
SCENARIOS = ("cold", "warm", "noop", "restore", "plan", "disk", "check", "restore-warm", "bundle", "image")
# --assume flags: probe + plan measured without touching a driver (the real probe is also timed)
ASSUME = ["--assume-driver", "570.86.10", "--assume-gpu", "8.9", "--assume-glibc", "2.35"]


# --- statistics and reports (pure; tested) ---------------------------------------------


def summarize(samples: Sequence[float]) -> dict[str, Any]:
    """Median and spread of one contender's samples (seconds or bytes)."""
    if not samples:
        return {"n": 0, "median": None, "min": None, "max": None, "samples": []}
    return {"n": len(samples), "median": statistics.median(samples), "min": min(samples),
            "max": max(samples), "samples": list(samples)}


def ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return None if a is None or not b else a / b


def rotations(items: Sequence[str], rep: int) -> list[str]:
    """A B C, B C A, C A B ...: interleaved, each contender in each position in turn."""
    k = rep % len(items) if items else 0
    return list(items[k:]) + list(items[:k])


def med(results: Mapping[str, Any], measure: str, who: str) -> Optional[float]:
    return ((results.get("measures", {}).get(measure) or {}).get(who) or {}).get("median")


def evaluate(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Each target of issue 15 (the tool's fixed cost): the measured ratio, the limit, met or
    not (None: not measured). Python's own start (`python -c pass`, the plan measure's "bare")
    is the floor for the no-op and the plan; uv is the reference for provisioning."""
    r = results
    cold = ratio(med(r, "cold", "ours"), med(r, "cold", "uv"))
    # the verification the install itself ran (its journal's verify.run seconds: the first import
    # of the env's packages, the benchmark); older results have only the separate `verify` run
    verify = med(r, "warm", "ours.verify_step") or med(r, "warm", "ours.verify")
    warm_ours, warm_uv = med(r, "warm", "ours"), med(r, "warm", "uv")
    warm = ratio(None if warm_ours is None else warm_ours - (verify or 0.0), warm_uv)
    bare = med(r, "plan", "bare")
    # the no-op against the python start timed next to it (older results: the plan's)
    noop = ratio(med(r, "noop", "ours"), med(r, "noop", "bare") or bare)
    plan = ratio(med(r, "plan", "ours"), bare)
    probed = ratio(med(r, "plan", "ours.probed"), bare)
    disk = ratio(med(r, "disk", "ours.second"), med(r, "disk", "ours.first"))
    restore = ratio(med(r, "restore", "ours"), med(r, "restore", "cold"))
    check = ratio(med(r, "check", "ours"), med(r, "check", "stat"))
    # --full against as many sha256sum processes as CPUs (xargs -P); older results: one sha256sum
    check_full = ratio(med(r, "check", "ours.full"), med(r, "check", "sha256sum.xargs") or med(r, "check", "sha256sum"))
    restore_warm = ratio(med(r, "restore-warm", "ours"), med(r, "restore-warm", "install"))
    restore_uv = ratio(med(r, "restore-warm", "ours"), med(r, "restore-warm", "uv"))
    rows = [
        ("cold provision", "ours / uv", cold, 1.2),
        ("warm provision minus verification", "(ours - its verify.run) / uv", warm, 1.2),
        ("no-op re-run", "ours / python -c pass", noop, 2.0),
        ("probe + plan", "ours / python -c pass", plan, 5.0),
        ("probe + plan (real probe)", "ours / python -c pass", probed, 6.0),
        ("second env on disk", "second / first", disk, 0.01),
        ("restore from snapshot", "restore / cold provision", restore, None),
        ("check (installed files)", "check / stat of the same files", check, 2.0),
        ("check --full", "check --full / xargs -P<cpus> sha256sum of the same files", check_full, 1.2),
        ("restore from a warm cache", "restore / a fresh install of the same env", restore_warm, 1.3),
        ("restore from a warm cache vs uv", "restore / (uv venv + uv pip sync + the same TF import)", restore_uv,
         None),
        ("bundle from a warm cache: bytes fetched", "bytes", med(r, "bundle", "ours.fetched"), 0.0),
        ("bundle from a warm cache vs pip download", "bundle / pip download of the same lock",
         ratio(med(r, "bundle", "ours"), med(r, "bundle", "pip")), None),
        ("image from a bundle: bytes fetched", "bytes", med(r, "image", "ours.fetched"), 0.0),
    ]
    return [{"target": t, "ratio_of": of, "value": v, "limit": lim,
             "met": None if v is None or lim is None else v <= lim} for t, of, v, lim in rows]


def _fmt(v: Optional[float], unit: str) -> str:
    if v is None:
        return "–"
    if unit == "bytes":
        for u in ("B", "KiB", "MiB", "GiB"):
            if abs(v) < 1024 or u == "GiB":
                return f"{v:.0f} {u}" if u == "B" else f"{v:.1f} {u}"
            v /= 1024
    return f"{v * 1000:.0f} ms" if v < 1 else f"{v:.2f} s"


def _cell(stat: Optional[Mapping[str, Any]], unit: str) -> str:
    if not stat or stat.get("median") is None:
        return "–"
    spread = f" ({_fmt(stat['min'], unit)}–{_fmt(stat['max'], unit)})" if stat["n"] > 1 else ""
    return _fmt(stat["median"], unit) + spread


def _r(v: Optional[float]) -> str:
    return "–" if v is None else f"{v:.2f}×"


def _check_rows(results: Mapping[str, Any]) -> list[str]:
    """The `check` measure's rows (issue 23): check vs stat, check --full vs sha256sum."""
    m = results.get("measures", {})
    if "check" not in m:
        return []
    lines: list[str] = []
    c = m["check"]
    lines.append(f"| check (sizes; sha256 of the libraries, remembered) vs `stat` of the same files | "
                 f"{_cell(c.get('ours'), 's')} | {_cell(c.get('stat'), 's')} | "
                 f"{_r(ratio(med(results, 'check', 'ours'), med(results, 'check', 'stat')))} |")
    lines.append(f"| check vs a bare os.stat() loop over the same files (the floor) | "
                 f"{_cell(c.get('ours'), 's')} | {_cell(c.get('stat.loop'), 's')} | "
                 f"{_r(ratio(med(results, 'check', 'ours'), med(results, 'check', 'stat.loop')))} |")
    lines.append(f"| check --full vs sha256sum of the same files | {_cell(c.get('ours.full'), 's')} | "
                 f"{_cell(c.get('sha256sum'), 's')} | "
                 f"{_r(ratio(med(results, 'check', 'ours.full'), med(results, 'check', 'sha256sum')))} |")
    if c.get("ours.cli"):
        lines.append(f"| `tfgpu-install check` (the command, its start and the snapshot drift included) vs "
                     f"`python -c pass` | {_cell(c.get('ours.cli'), 's')} | {_cell(c.get('bare'), 's')} | "
                     f"{_r(ratio(med(results, 'check', 'ours.cli'), med(results, 'check', 'bare')))} |")
    return lines


def _pair(results: Mapping[str, Any], label: str, measure: str, a: str, b: str) -> list[str]:
    m = results.get("measures", {}).get(measure) or {}
    if not m.get(a):
        return []
    return [f"| {label} | {_cell(m.get(a), 's')} | {_cell(m.get(b), 's')} | "
            f"{_r(ratio(med(results, measure, a), med(results, measure, b)))} |"]


def _long_rows(results: Mapping[str, Any]) -> list[str]:
    """The commands users wait minutes for (issue 44): restore, bundle and image from warm caches."""
    return [
        *_pair(results, "restore from a warm cache vs a fresh install of the same env", "restore-warm", "ours",
               "install"),
        *_pair(results, "restore from a warm cache vs uv venv + uv pip sync + the same TF import", "restore-warm",
               "ours", "uv"),
        *_pair(results, "`check --full` (the command) vs xargs -P<cpus> sha256sum", "check", "ours.cli.full",
               "sha256sum.xargs"),
        *_pair(results, "snapshot bundle (warm caches) vs pip download of the same lock (its cache warm)", "bundle",
               "ours", "pip"),
        *_pair(results, "snapshot image --bundle vs cp -r of the bundle", "image", "ours", "cp"),
    ]


def render_markdown(results: Mapping[str, Any]) -> str:
    """The BENCHMARKS.md table: medians (min–max) per contender, the ratios, then the targets."""
    m = results.get("measures", {})
    lines = [f"mode: {results.get('mode')}, reps: {results.get('reps')}, {results.get('when', '')}",
             "", "| measure | ours | uv | pip | ours/uv | ours/pip |", "|---|---|---|---|---|---|"]
    for name, label in (("cold", "cold provision (empty caches)"), ("warm", "warm provision (hot caches)"),
                        ("noop", "no-op re-run")):
        if name in m:
            row = m[name]
            lines.append(f"| {label} | {_cell(row.get('ours'), 's')} | {_cell(row.get('uv'), 's')} | "
                         f"{_cell(row.get('pip'), 's')} | "
                         f"{_r(ratio(med(results, name, 'ours'), med(results, name, 'uv')))} "
                         f"| {_r(ratio(med(results, name, 'ours'), med(results, name, 'pip')))} |")
    if "warm" in m and m["warm"].get("ours.verify_step"):
        lines.append("| verification inside the install (journal: verify.run) | "
                     f"{_cell(m['warm']['ours.verify_step'], 's')}"
                     " | | | | |")
    if "warm" in m and m["warm"].get("ours.verify"):
        lines.append(f"| verification alone (`tfgpu-install verify`) | {_cell(m['warm']['ours.verify'], 's')} "
                     "| | | | |")
    if "disk" in m:
        d = m["disk"]
        for who in ("first", "second"):
            lines.append(f"| disk: {who} env{' (not shared with the first or the cache)' if who == 'second' else ''}"
                         f" | {_cell(d.get('ours.' + who), 'bytes')} | {_cell(d.get('uv.' + who), 'bytes')} | "
                         f"{_cell(d.get('pip.' + who), 'bytes')} | | |")
    lines += ["", "| measure | A | B | A/B |", "|---|---|---|---|"]
    if "restore" in m:
        lines.append(f"| restore vs cold provision | {_cell(m['restore'].get('ours'), 's')} | "
                     f"{_cell(m['restore'].get('cold'), 's')} | "
                     f"{_r(ratio(med(results, 'restore', 'ours'), med(results, 'restore', 'cold')))} |")
    if "plan" in m:
        p = m["plan"]
        lines.append(f"| probe + plan (--assume) vs `python -c pass` | {_cell(p.get('ours'), 's')} | "
                     f"{_cell(p.get('bare'), 's')} | "
                     f"{_r(ratio(med(results, 'plan', 'ours'), med(results, 'plan', 'bare')))} |")
        if p.get("ours.probed"):
            lines.append(f"| probe + plan (real probe) vs `python -c pass` | {_cell(p.get('ours.probed'), 's')} | "
                         f"{_cell(p.get('bare'), 's')} | "
                         f"{_r(ratio(med(results, 'plan', 'ours.probed'), med(results, 'plan', 'bare')))} |")
    lines += _check_rows(results)
    lines += _long_rows(results)
    lines += ["", "| target | ratio | measured | limit | met |", "|---|---|---|---|---|"]
    for t in evaluate(results):
        if t["value"] is None and t["limit"] is None:
            continue
        met = {True: "yes", False: "**no**", None: "–"}[t["met"]]
        if t["ratio_of"] == "bytes":
            lines.append(f"| {t['target']} | bytes | {_fmt(t['value'], 'bytes')} | {_fmt(t['limit'], 'bytes')} "
                         f"| {met} |")
            continue
        lim = "–" if t["limit"] is None else (f"< {t['limit']:.0%}" if t["limit"] < 0.1 else f"≤ {t['limit']:.2f}×")
        share = t["limit"] and t["limit"] < 0.1
        val = "–" if t["value"] is None else (f"{t['value'] * 100:.3f}%" if share else f"{t['value']:.2f}×")
        lines.append(f"| {t['target']} | {t['ratio_of']} | {val} | {lim} | {met} |")
    if results.get("load"):
        lines += ["", f"load average (1 min) at start/end: {results['load'][0]:.1f} / {results['load'][1]:.1f} "
                  f"on {results.get('cpus')} CPUs"]
    lines += [f"- {n}" for n in results.get("notes") or []]
    if results.get("failures"):
        lines += ["", f"{len(results['failures'])} command(s) failed (not counted above; the JSON file has "
                  "their output):"]
        lines += [f"- {f['what']}: exit {f['rc']} after {_fmt(f.get('seconds'), 's')}" for f in results["failures"]]
    return "\n".join(lines) + "\n"


def write_results(out: Path, results: Mapping[str, Any], stem: Optional[str] = None) -> tuple[Path, Path]:
    """<out>/<stem>.json and .md, each written to a temp file and renamed into place."""
    out.mkdir(parents=True, exist_ok=True)
    stem = stem or f"bench-{results.get('mode')}-{time.strftime('%Y%m%dT%H%M%S')}"
    paths = (out / f"{stem}.json", out / f"{stem}.md")
    for path, text in zip(paths, (json.dumps(results, indent=1, sort_keys=True) + "\n", render_markdown(results))):
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    return paths


# --- measuring ---------------------------------------------------------------------------


def disk_usage(paths: Sequence[Path], exclude: Sequence[Path] = ()) -> int:
    """Bytes allocated under `paths`, each inode once, leaving out inodes found under `exclude`
    (so a second env's number is what it adds next to the first env and uv's cache)."""
    seen: set[tuple[int, int]] = set()

    def walk(root: Path) -> Iterator[os.stat_result]:
        try:
            yield os.lstat(root)
        except OSError:
            return
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                try:
                    yield os.lstat(os.path.join(dirpath, name))
                except OSError:
                    continue

    for root in exclude:
        seen.update((st.st_dev, st.st_ino) for st in walk(root))
    total = 0
    for root in paths:
        for st in walk(root):
            key = (st.st_dev, st.st_ino)
            if key not in seen:
                seen.add(key)
                total += st.st_blocks * 512
    return total


def journal_seconds(state_dir: Path, env_dir: Path, step: str) -> Optional[float]:
    """The seconds the newest run on env_dir recorded for `step` (its journal's "done" line)."""
    for journal in state_dir.glob("envs/*/journal.jsonl"):
        found, mine = None, False
        for line in journal.read_text().splitlines():
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("event") == "run":
                mine = e.get("env") == str(env_dir)
            elif (mine and e.get("event") == "done" and e.get("step") == step
                  and isinstance(e.get("seconds"), (int, float))):
                found = float(e["seconds"])
        if found is not None:
            return found
    return None


@dataclass
class Bench:
    mode: str
    reps: int
    work: Path
    python: str  # the interpreter every env is built on
    allow_cpu: bool
    base_env: dict[str, str]  # index URLs, profiles dir, PATH with uv
    uv: str
    samples: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    failures: list[dict[str, Any]] = field(default_factory=list)
    requirements: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    spaces: dict[str, dict[str, str]] = field(default_factory=dict)  # the warm workspaces, once primed
    contenders: tuple[str, ...] = CONTENDERS  # --contenders: leave pip out where its minutes are not wanted
    _n: int = 0
    load_start: float = field(default_factory=lambda: os.getloadavg()[0])  # other work skews times

    def add(self, measure: str, who: str, value: float) -> None:
        self.samples.setdefault(measure, {}).setdefault(who, []).append(value)

    def workspace(self, name: str) -> dict[str, str]:
        """Fresh HOME, tool state/cache/data, uv and pip caches: one machine's worth of caches."""
        self._n += 1
        ws = self.work / f"{self._n:03d}-{name}"
        env = dict(self.base_env)
        for var, sub in (("HOME", "home"), ("TFGPU_STATE_DIR", "state"), ("TFGPU_CACHE_DIR", "cache"),
                         ("TFGPU_DATA_DIR", "data"), ("UV_CACHE_DIR", "uv-cache"), ("PIP_CACHE_DIR", "pip-cache"),
                         ("XDG_CACHE_HOME", "xdg-cache")):
            (ws / sub).mkdir(parents=True, exist_ok=True)
            env[var] = str(ws / sub)
        env["BENCH_WS"] = str(ws)
        return env

    def run(self, argv: Sequence[str], env: Mapping[str, str], what: str, timeout: float) -> Optional[float]:
        """Seconds the command took, or None (recorded as a failure) when it failed."""
        start = time.perf_counter()
        try:
            p = subprocess.run(list(argv), env=dict(env), capture_output=True, text=True, timeout=timeout,
                               stdin=subprocess.DEVNULL)
            rc, tail = p.returncode, (p.stderr or p.stdout)[-2000:]
        except subprocess.TimeoutExpired:
            rc, tail = 124, f"timed out after {timeout} s"
        took = time.perf_counter() - start
        if rc != 0:
            self.failures.append({"what": what, "argv": list(argv), "rc": rc, "tail": tail, "seconds": took})
            last = (tail.strip().splitlines() or [""])[-1]
            print(f"  FAILED {what} (rc {rc}): {last}", file=sys.stderr)
            return None
        return took

    # the contenders' commands ------------------------------------------------------------

    def tool(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "tfgpu_install", *args]

    def install_args(self, env_dir: Path) -> list[str]:
        return self.tool("--profile", "stable", "-y", "--env", str(env_dir), "--python", self.python,
                         *(["--allow-cpu"] if self.allow_cpu else []))

    def provision(self, who: str, env: Mapping[str, str], env_dir: Path, timeout: float) -> Optional[float]:
        """One new env with the pins: ours (install), uv (uv venv + uv pip install), pip (venv + pip)."""
        if who == "ours":
            return self.run(self.install_args(env_dir), env, f"ours provision {env_dir}", timeout)
        if who == "uv":
            venv = self.run([self.uv, "venv", "--quiet", "--python", self.python, str(env_dir)], env, "uv venv",
                            timeout)
        else:
            venv = self.run([self.python, "-m", "venv", str(env_dir)], env, "python -m venv", timeout)
        if venv is None:
            return None
        install = self.noop(who, env, env_dir, timeout, what=f"{who} install")
        return None if install is None else venv + install

    def noop(self, who: str, env: Mapping[str, str], env_dir: Path, timeout: float,
             what: str = "") -> Optional[float]:
        """The same install again on a complete env (also the install half of provision)."""
        py = str(env_dir / "bin" / "python")
        if who == "ours":
            return self.run(self.install_args(env_dir), env, what or "ours no-op", timeout)
        if who == "uv":
            return self.run([self.uv, "pip", "install", "--python", py, *self.requirements], env,
                            what or "uv no-op", timeout)
        return self.run([py, "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
                         *self.requirements], env, what or "pip no-op", timeout)

    # the scenarios ---------------------------------------------------------------------

    def measure_plan(self) -> None:
        env = self.workspace("plan")
        py = self.python_minor()
        n = max(3, 5 * self.reps)
        probe = self.tool("plan", "--json", "--profile", "stable", *(["--allow-cpu"] if self.allow_cpu else []))
        cmds = {"bare": [sys.executable, "-c", "pass"],
                "ours": probe + ASSUME + ["--assume-python", py],
                "ours.probed": probe}
        for i in range(n):
            for who in rotations(list(cmds), i):
                took = self.run(cmds[who], env, f"plan {who}", 120)
                if took is not None:
                    self.add("plan", who, took)

    def python_minor(self) -> str:
        out = subprocess.run([self.python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             capture_output=True, text=True, check=True)
        return out.stdout.strip()

    def plan_requirements(self) -> list[str]:
        """The pins as `plan --json` chose them (Choice.requirements())."""
        env = self.workspace("pins")
        # the install's own flags (no --assume-driver/gpu): the pins it will really install
        argv = self.tool("plan", "--json", "--profile", "stable", "--assume-python", self.python_minor(),
                         *(["--allow-cpu"] if self.allow_cpu else []))
        p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
        if p.returncode != 0:
            raise SystemExit(f"bench: `plan --json` failed (rc {p.returncode}): {p.stderr.strip()[-800:]}")
        c = json.loads(p.stdout)["choice"]
        return ([f"{c['package']}=={c['tensorflow']}"] + [f"{n}=={v}" for n, v in sorted(c["pins"].items())]
                + [f"{n}{s}" for n, s in sorted(c["constraints"].items())])

    def check_pins(self, state_dir: Path) -> None:
        """uv and pip get what ours really installed: the journal's packages.install record."""
        for journal in state_dir.glob("envs/*/journal.jsonl"):
            for line in journal.read_text().splitlines():
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                reqs = (e.get("undo") or {}).get("requirements") if e.get("step") == "packages.install" else None
                if e.get("event") == "done" and reqs and list(reqs) != self.requirements:
                    self.notes.append(f"plan's pins {self.requirements} differ from the install's {reqs}: "
                                      "uv and pip get the install's")
                    self.requirements = list(reqs)

    def measure_cold(self, timeout: float, snapshot: Optional[Path]) -> None:
        """Each sample on a fresh workspace (empty caches); restore interleaved with the rest."""
        who_all = list(self.contenders) + (["restore"] if snapshot else [])
        for i in range(self.reps):
            for who in rotations(who_all, i):
                env = self.workspace(f"cold-{who}")
                env_dir = Path(env["TFGPU_DATA_DIR"]) / "env"
                print(f"cold {i + 1}/{self.reps}: {who}", file=sys.stderr)
                if who == "restore":
                    took = self.run(self.tool("snapshot", "restore", str(snapshot), "--env", str(env_dir), "-y",
                                              *(["--allow-cpu"] if self.allow_cpu else [])), env, "restore", timeout)
                    if took is not None:
                        self.add("restore", "ours", took)
                else:
                    took = self.provision(who, env, env_dir, timeout)
                    if took is not None:
                        self.add("cold", who, took)
                        if who == "ours":
                            self.add("restore", "cold", took)
                shutil.rmtree(env["BENCH_WS"], ignore_errors=True)  # GBs in the full mode

    def measure_warm(self, timeout: float, scenarios: Sequence[str]) -> Optional[Path]:
        """One workspace per contender, its caches primed by a first (untimed) env; then each rep
        a new env (warm), the same install again on it (no-op); disk of the second env.
        Returns ours' snapshot file (for restore)."""
        # only ours is needed for restore-warm / bundle / image alone (priming pip costs minutes in the full mode)
        contenders = self.contenders if {"warm", "noop", "disk"} & set(scenarios) else ("ours",)
        spaces = {who: self.workspace(f"warm-{who}") for who in contenders}
        self.spaces = spaces
        first = {who: Path(spaces[who]["BENCH_WS"]) / "env-0" for who in contenders}
        for who in contenders:
            print(f"prime: {who}", file=sys.stderr)
            self.provision(who, spaces[who], first[who], timeout)
            if who == "ours":
                self.check_pins(Path(spaces[who]["TFGPU_STATE_DIR"]))
        for i in range(self.reps if contenders == self.contenders else 0):
            for who in rotations(list(contenders), i):
                env_dir = Path(spaces[who]["BENCH_WS"]) / f"env-{i + 1}"
                print(f"warm {i + 1}/{self.reps}: {who}", file=sys.stderr)
                took = self.provision(who, spaces[who], env_dir, timeout)
                if took is not None and "warm" in scenarios:
                    self.add("warm", who, took)
                if who == "ours" and took is not None and "warm" in scenarios:
                    step = journal_seconds(Path(spaces[who]["TFGPU_STATE_DIR"]), env_dir, "verify.run")
                    if step is not None:
                        self.add("warm", "ours.verify_step", step)
                    # the verification's own cost, apart: the same check the install ran
                    v = self.run(self.tool("verify", "--env", str(env_dir), *(["--cpu-ok"] if self.allow_cpu else [])),
                                 spaces[who], "ours verify", timeout)
                    if v is not None:
                        self.add("warm", "ours.verify", v)
            if "noop" in scenarios:
                self.measure_noop(spaces, i, timeout)
        if "disk" in scenarios:
            self.measure_disk(spaces, first)
        snaps = sorted(Path(spaces["ours"]["TFGPU_STATE_DIR"]).glob("snapshots/*.yaml"))
        if not snaps:
            self.notes.append("no snapshot was recorded by the primed install: restore not measured")
            return None
        keep = self.work / "snapshot.yaml"
        shutil.copy2(snaps[0], keep)
        return keep

    def measure_check(self, timeout: float) -> None:
        """`check`'s file verification (check_installed, the libraries' hashes remembered from a
        first check) against coreutils `stat` over the same files (and a bare os.stat() loop, the
        floor), and check_installed(full) against `sha256sum` over the same list, which reads every
        byte (after a first untimed read: the page cache warm for both). The command's own cost
        (Python start, the snapshot drift) is reported beside `python -c pass`."""
        sys.path.insert(0, str(REPO))
        from tfgpu_install.env.integrity import check_installed, recorded_files

        env = self.workspace("check")
        env_dir = Path(env["BENCH_WS"]) / "env"
        if self.provision("ours", env, env_dir, timeout) is None:
            return
        files = recorded_files(env_dir)
        cache = Path(env["BENCH_WS"]) / "file-hashes.json"
        if not check_installed(env_dir, cache=cache).clean:
            self.notes.append("check found the freshly installed env damaged: check not measured")
            return

        def coreutils(tool: list[str]) -> None:
            for i in range(0, len(files), 2000):
                subprocess.run([*tool, "--", *files[i:i + 2000]], capture_output=True, check=False)

        def stat_loop() -> None:  # the floor: one os.stat per file, nothing else
            for f in files:
                try:
                    os.stat(f)
                except OSError:
                    pass

        def timed(fn: Callable[[], Any]) -> float:
            start = time.perf_counter()
            fn()
            return time.perf_counter() - start

        listing = Path(env["BENCH_WS"]) / "files.nul"
        listing.write_bytes(b"".join(f.encode() + b"\0" for f in files))
        cpus = str(len(os.sched_getaffinity(0)))

        def xargs_sha256sum() -> None:  # the reference of issue 44: as many sha256sum processes as CPUs
            with open(listing, "rb") as fh:
                subprocess.run(["xargs", "-0", "-P", cpus, "-n", "64", "sha256sum", "--"], stdin=fh,
                               capture_output=True, check=False)

        cmds: dict[str, Callable[[], Any]] = {
            "stat": lambda: coreutils(["stat", "--printf=%s %Y\\n"]),
            "stat.loop": stat_loop,
            "ours": lambda: check_installed(env_dir, cache=cache),
            "sha256sum": lambda: coreutils(["sha256sum"]),
            "sha256sum.xargs": xargs_sha256sum,
            "ours.full": lambda: check_installed(env_dir, full=True),
        }
        coreutils(["sha256sum"])  # the page cache warm for both readers
        self.notes.append(f"check: {len(files)} recorded files")
        for i in range(max(5, 5 * self.reps)):
            for who in rotations(list(cmds), i):
                self.add("check", who, timed(cmds[who]))
            for who in rotations(["bare", "ours.cli", "ours.cli.full"], i):
                argv = ([sys.executable, "-c", "pass"] if who == "bare"
                        else self.tool("check", "--env", str(env_dir), *(["--full"] if who == "ours.cli.full" else [])))
                took = self.run(argv, env, f"check {who}", timeout)
                if took is not None:
                    self.add("check", who, took)

    def measure_restore_warm(self, space: Mapping[str, str], snapshot: Path, timeout: float) -> None:
        """restore of the primed install's known-good snapshot into a new env, uv's cache warm, against
        (a) a fresh install of the same env and (b) uv venv + uv pip sync of the same pins + the same
        TF import; interleaved, in the primed workspace (its caches)."""
        lock = Path(space["BENCH_WS"]) / "restore-lock.txt"
        pins = [line.split()[0] for line in _snapshot_pins(snapshot)]
        lock.write_text("\n".join(pins) + "\n")
        cpu = ["--allow-cpu"] if self.allow_cpu else []
        for i in range(self.reps):
            for who in rotations(["ours", "install", "uv"], i):
                target = Path(space["BENCH_WS"]) / f"restore-{who}-{i}"
                print(f"restore (warm) {i + 1}/{self.reps}: {who}", file=sys.stderr)
                if who == "ours":
                    took = self.run(self.tool("snapshot", "restore", str(snapshot), "--env", str(target), "-y", *cpu),
                                    space, "restore (warm)", timeout)
                elif who == "install":
                    took = self.run(self.install_args(target), space, "fresh install (warm)", timeout)
                else:
                    took = self.uv_sync(space, target, lock, timeout)
                if took is not None:
                    self.add("restore-warm", who, took)
                shutil.rmtree(target, ignore_errors=True)

    def uv_sync(self, space: Mapping[str, str], target: Path, lock: Path, timeout: float) -> Optional[float]:
        start = time.perf_counter()
        py = str(target / "bin" / "python")
        for argv, what in (([self.uv, "venv", "--quiet", "--python", self.python, str(target)], "uv venv"),
                           ([self.uv, "pip", "sync", "--python", py, str(lock)], "uv pip sync"),
                           ([py, "-c", "import tensorflow"], "the same TF import")):
            if self.run(argv, space, what, timeout) is None:
                return None
        return time.perf_counter() - start

    def measure_bundle_image(self, space: Mapping[str, str], env_dir: Path, timeout: float,
                             scenarios: Sequence[str]) -> None:
        """snapshot bundle of the primed env's export (uv's cache warm) against pip download of the same
        lock (pip's cache warm: a first pip download, untimed); then snapshot image --bundle against
        cp -r of that bundle. Bytes fetched are counted from the bundle's manifest."""
        ws = Path(space["BENCH_WS"])
        export = ws / "export.yaml"
        if self.run(self.tool("snapshot", "export", "--env", str(env_dir), "-o", str(export)), space, "export",
                    timeout) is None:
            return
        reqs = ws / "bundle-requirements.txt"
        reqs.write_text("".join(line + "\n" for line in _snapshot_pins(export, hashes=True)))
        pip_download = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--require-hashes", "-r", str(reqs)]
        self.run([*pip_download, "-d", str(ws / "pip-prime")], space, "pip download (prime its cache)", timeout)
        shutil.rmtree(ws / "pip-prime", ignore_errors=True)
        first = None
        for i in range(self.reps):
            for who in rotations(["ours", "pip"], i):
                out = ws / f"bundle-{who}-{i}"
                print(f"bundle {i + 1}/{self.reps}: {who}", file=sys.stderr)
                if who == "ours":
                    took = self.run(self.tool("snapshot", "bundle", str(export), "-o", str(out)), space, "bundle",
                                    timeout)
                    made = _made_from(out)
                    if made is not None:
                        self.add("bundle", "ours.fetched", float(made.get("fetched_bytes") or 0))
                else:
                    took = self.run([*pip_download, "-d", str(out)], space, "pip download", timeout)
                if took is not None and "bundle" in scenarios:
                    self.add("bundle", who, took)
                if who == "ours" and first is None and took is not None:
                    first = out
                else:
                    shutil.rmtree(out, ignore_errors=True)
        if first is None or "image" not in scenarios:
            return
        for i in range(self.reps):
            for who in rotations(["ours", "cp"], i):
                out = ws / f"image-{who}-{i}"
                argv = (self.tool("snapshot", "image", str(export), "-o", str(out), "--bundle", str(first))
                        if who == "ours" else ["cp", "-r", str(first), str(out)])
                took = self.run(argv, space, f"image {who}", timeout)
                if took is not None:
                    self.add("image", who, took)
                made = _made_from(out / "bundle") if who == "ours" else None
                if made is not None:
                    self.add("image", "ours.fetched", float(made.get("fetched_bytes") or 0))
                shutil.rmtree(out, ignore_errors=True)

    def measure_noop(self, spaces: Mapping[str, Mapping[str, str]], i: int, timeout: float) -> None:
        """The same install again on rep i's env, each contender and Python's bare start interleaved."""
        for who in rotations([*self.contenders, "bare"], i + 1):
            if who == "bare":  # Python's own start, interleaved: the no-op's floor
                took = self.run([sys.executable, "-c", "pass"], spaces["ours"], "noop bare", 60)
            else:
                took = self.noop(who, spaces[who], Path(spaces[who]["BENCH_WS"]) / f"env-{i + 1}", timeout)
            if took is not None:
                self.add("noop", who, took)

    def measure_disk(self, spaces: Mapping[str, Mapping[str, str]], first: Mapping[str, Path]) -> None:
        """Disk of the first env, and what a second one adds beyond it and the caches."""
        cache_dev = os.stat(spaces["ours"]["UV_CACHE_DIR"]).st_dev
        if os.stat(first["ours"].parent).st_dev != cache_dev:
            self.notes.append("uv's cache is on another filesystem than the envs: uv copies, no hardlinks")
        for who in self.contenders:
            cache = [Path(spaces[who]["UV_CACHE_DIR"]), Path(spaces[who]["PIP_CACHE_DIR"])]
            self.add("disk", f"{who}.first", disk_usage([first[who]]))
            if self.reps:
                second = Path(spaces[who]["BENCH_WS"]) / "env-1"
                self.add("disk", f"{who}.second", disk_usage([second], exclude=[first[who], *cache]))

    def results(self, scenarios: Sequence[str]) -> dict[str, Any]:
        return {
            "mode": self.mode, "reps": self.reps, "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "scenarios": list(scenarios), "python": self.python, "uv": self.uv,
            "requirements": self.requirements, "cpus": os.cpu_count(), "notes": self.notes,
            "measures": {m: {w: summarize(v) for w, v in by.items()} for m, by in self.samples.items()},
            "failures": self.failures, "load": [self.load_start, os.getloadavg()[0]],
        }


def _snapshot_pins(path: Path, hashes: bool = False) -> list[str]:
    """name==version of each package of a snapshot file (with --hash options when asked)."""
    import yaml

    doc = yaml.safe_load(path.read_text())
    out = []
    for p in doc.get("packages") or []:
        line = f"{p['name']}=={p['version']}"
        if hashes:
            line += "".join(f" --hash={h}" for h in p.get("hashes") or [])
        out.append(line)
    return out


def _made_from(bundle: Path) -> Optional[dict[str, Any]]:
    try:
        made = json.loads((bundle / "manifest.json").read_text()).get("made_from")
    except (OSError, ValueError):
        return None
    return made if isinstance(made, dict) else None


def with_targets(results: Mapping[str, Any]) -> dict[str, Any]:
    """The results plus the markdown's targets table, met / not met per target."""
    return {**results, "targets": evaluate(results)}


# --- main ----------------------------------------------------------------------------------


def _uv_binary() -> str:
    found = shutil.which("uv")
    if found:
        return found
    import uv  # the `uv` PyPI package, a dependency of the tool

    return str(uv.find_uv_bin())


def _quick_index(work: Path) -> Callable[[], Any]:
    """The tests' wheelhouse (fake TF computing with the real numpy) and test knowledge dir."""
    sys.path.insert(0, str(REPO))
    from tests.support.install_kit import computing_wheelhouse, write_knowledge

    wh = computing_wheelhouse(work / "wheelhouse")
    write_knowledge(work / "knowledge")
    return wh.serve  # type: ignore[attr-defined, no-any-return]


def parse_args(argv: Optional[Sequence[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="the tests' local wheelhouse over loopback HTTP")
    p.add_argument("--reps", type=int, default=3, help="repetitions of each measure (default 3)")
    p.add_argument("--out", type=Path, default=REPO / "bench-results", help="where the JSON and markdown go")
    p.add_argument("--allow-cpu", action="store_true", help="no GPU here: verify on the CPU (the quick mode always "
                                                            "does)")
    p.add_argument("--python", default=None, help="interpreter the envs are built on (default: this one's base)")
    p.add_argument("--only", default=",".join(SCENARIOS), help=f"comma-separated subset of {','.join(SCENARIOS)}")
    p.add_argument("--work", type=Path, default=None, help="scratch dir (default: a temp dir, removed after)")
    p.add_argument("--contenders", default=",".join(CONTENDERS),
                   help="comma-separated subset of ours,uv,pip (pip's full-mode installs take minutes each)")
    p.add_argument("--timeout", type=float, default=None, help="per command, seconds (default 300 quick, 3600 full)")
    return p.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = parse_args(argv)
    scenarios = [s for s in args.only.split(",") if s]
    bad = [s for s in scenarios if s not in SCENARIOS]
    if bad:
        print(f"bench: unknown scenario(s) {', '.join(bad)}; choose from {', '.join(SCENARIOS)}", file=sys.stderr)
        return 2
    work = args.work or Path(tempfile.mkdtemp(prefix="tfgpu-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    uv = _uv_binary()
    (work / "bin").mkdir(exist_ok=True)
    if not (work / "bin" / "uv").exists():
        os.symlink(uv, work / "bin" / "uv")  # ours finds the same uv on PATH
    # One package source for every contender: the machine's extra sources (this one sets
    # PIP_FIND_LINKS=/opt/wheels and a pip.conf with find-links and extra indexes) are read by
    # pip and passed on to uv by ours, but not seen by bare uv, which then had less to scan.
    dropped = ("VIRTUAL_ENV", "PYTHONHOME", "CONDA_PREFIX", "PIP_FIND_LINKS", "UV_FIND_LINKS",
               "PIP_EXTRA_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_INDEX")
    base = {k: v for k, v in os.environ.items() if k not in dropped}
    base["PIP_CONFIG_FILE"] = os.devnull
    base["PATH"] = f"{work / 'bin'}:{base.get('PATH', '/usr/bin:/bin')}"
    base["PYTHONPATH"] = str(REPO)
    base["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    # An installed tool runs from .pyc files (pip compiles them at install time); without them
    # every sample pays for compiling the whole package again (PYTHONDONTWRITEBYTECODE=1 in CI
    # shells doubled the plan measure).
    base.pop("PYTHONDONTWRITEBYTECODE", None)
    compileall.compile_dir(str(REPO / "tfgpu_install"), quiet=1)
    python = args.python or getattr(sys, "_base_executable", None) or sys.executable
    server = None
    try:
        if args.quick:
            server = _quick_index(work)().start()
            # uv drops a connection once it has what it needs (BrokenPipe): not worth a traceback
            server._server.handle_error = lambda *a: None
            base.update(TFGPU_PROFILES_DIR=str(work / "knowledge"), UV_INDEX_URL=server.url, PIP_INDEX_URL=server.url)
        b = Bench("quick" if args.quick else "full", args.reps, work, python, args.allow_cpu or args.quick, base, uv)
        timeout = args.timeout or (300.0 if args.quick else 3600.0)
        b.contenders = tuple(c for c in CONTENDERS if c in args.contenders.split(","))
        b.requirements = b.plan_requirements()
        print(f"pins: {' '.join(b.requirements)}", file=sys.stderr)
        if "plan" in scenarios:
            b.measure_plan()
        snapshot = None
        if {"warm", "noop", "disk", "restore", "restore-warm", "bundle", "image"} & set(scenarios):
            snapshot = b.measure_warm(timeout, scenarios)
            if snapshot is not None and "restore-warm" in scenarios:
                b.measure_restore_warm(b.spaces["ours"], snapshot, timeout)
            if {"bundle", "image"} & set(scenarios):
                b.measure_bundle_image(b.spaces["ours"], Path(b.spaces["ours"]["BENCH_WS"]) / "env-0", timeout,
                                       scenarios)
        if {"cold", "restore"} & set(scenarios):
            b.measure_cold(timeout, snapshot if "restore" in scenarios else None)
        if "check" in scenarios:
            b.measure_check(timeout)
        results = b.results(scenarios)
    finally:
        if server is not None:
            server.stop()
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    results = with_targets(results)
    js, md = write_results(args.out, results)
    sys.stdout.write(render_markdown(results))
    print(f"\nwrote {js} and {md}", file=sys.stderr)
    return 1 if results["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
