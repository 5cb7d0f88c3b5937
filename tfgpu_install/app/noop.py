"""`install`'s no-op fast path: a re-run on a complete env answers from what the last
successful run left (a stamp), before importing the step machinery, rich, yaml or packaging.

The stamp (<state dir>/noop/<key>.json) is found by the invocation: the tool's version and
location, the arguments, the working directory and the environment (all of it but a few
variables a shell changes between commands). It holds the answer a full no-op run gives and
what that answer depends on, re-read on every use (`watch`):

- the env's fingerprint (installed distributions, activation files, CUDA/cuDNN libraries),
- the mtime of every directory in its site-packages (a package's file removed or replaced),
- every file its records list (RECORD, conda-meta): its type, inode, size, mtime and ctime, as
  install's check of the installed files stats each of them (a file edited in place: its size),
- the journal (a rollback, a failed or another run change it), the verification record's
  verdict and fingerprint,
- every file the journal's steps touched (a shell rc file, an ld.so.conf.d entry),
- the driver (/proc/driver/nvidia/version), the NVIDIA devices on the PCI bus and in /dev,
- what the probe looks at: the PATH directories, pyenv's versions, conda's env list, CUDA
  toolkits under /usr/local and /opt, the loader cache (/etc/ld.so.cache),
- the knowledge files (the profiles directory).

Any difference, a stamp that does not parse, or anything unreadable: no answer, and the full
path runs (and leaves a new stamp). The answer itself is the one the full path gives on a
complete env: each step done (or unchanged since it last ran), nothing changed.
"""

from __future__ import annotations

import hashlib
import json
import os
from array import array
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import tfgpu_install
from tfgpu_install.context import Context
from tfgpu_install.env.verification import BadRecord, read_record_file
from tfgpu_install.errors import TfgpuError
from tfgpu_install.guard.jsondoc import items

# 2: the site-packages directories listed in the stamp (stat, not listed, on every answer);
# 3: the recorded files listed in it too (each stat()ed on every answer)
FORMAT = 3
# Variables a shell changes between two runs of the same command; they change nothing here.
_VOLATILE = frozenset({
    "PWD", "OLDPWD", "SHLVL", "_", "COLUMNS", "LINES", "SSH_CLIENT", "SSH_CONNECTION", "SSH_TTY",
    "WINDOWID", "TERM_SESSION_ID", "XDG_SESSION_ID", "MAIL", "HISTFILE", "PS1", "PS2",
})
_UNCHANGED = "nothing changed since it last ran"  # the executor's detail for a fingerprinted step


def invocation_key(argv: Sequence[str], environ: Mapping[str, str], cwd: str) -> str:
    doc = {
        "version": tfgpu_install.__version__, "tool": os.path.dirname(tfgpu_install.__file__ or ""),
        "argv": list(argv), "cwd": cwd,
        "environ": sorted((k, v) for k, v in environ.items() if k not in _VOLATILE),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def stamp_path(ctx: Context, key: str) -> Path:
    return ctx.state_dir / "noop" / f"{key[:40]}.json"


def _stat(path: Path) -> list[Any]:
    """What changes when a file is replaced or edited (or a directory gains/loses an entry)."""
    try:
        st = os.stat(path)
    except OSError:
        return ["missing"]
    return [st.st_mode >> 12, st.st_size, st.st_mtime_ns, st.st_ino]


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def _verification(path: Path) -> list[Any]:
    """What install reads from the verification record (`verify` rewrites it with a new date)."""
    try:
        record = read_record_file(path)
    except BadRecord:
        return ["unreadable"]
    if record is None:
        return [None, None, None]
    return [record.fingerprint, record.report.ok if record.report else None, record.gpu_verified]


def _knowledge_dir(ctx: Context) -> Path:
    if ctx.profiles_dir is not None:
        return ctx.profiles_dir
    try:  # as knowledge.load.profiles_dir() finds it, without importing the loader
        import tfgpu_install.profiles  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        return Path(__file__).resolve().parents[2] / "profiles"
    return Path(tfgpu_install.profiles.__file__).resolve().parent


def _nvidia_devices(ctx: Context) -> list[str]:
    found: list[str] = []
    pci = ctx.sys_path("/sys/bus/pci/devices")
    try:
        for dev in sorted(os.listdir(pci)):
            if _read(pci / dev / "vendor").strip() == "0x10de":
                found.append(f"{dev}:{_read(pci / dev / 'device').strip()}")
    except OSError:
        pass
    try:
        found += sorted(n for n in os.listdir(ctx.sys_path("/dev")) if n.startswith("nvidia"))
    except OSError:
        pass
    return found


def _touched(journal: Path) -> list[str]:
    """Every path the journal's steps said they touch (read with the journal's own reader)."""
    from tfgpu_install.env.journal import Journal, current_epoch

    paths: set[str] = set()
    for e in current_epoch(Journal(journal).entries()):
        if e.event == "begin":
            paths.update(str(p) for p in items(e.data, "touches"))
    return sorted(paths)


def site_dirs(env: Path) -> list[str]:
    """Every directory under the env's site-packages (bytecode caches aside), walked once when the
    stamp is written: the answer later stats this list instead of listing ~4,000 directories again."""
    from tfgpu_install.env.layout import site_packages_dirs

    out: list[str] = []
    stack = [str(p) for p in site_packages_dirs(env)]
    while stack:
        d = stack.pop()
        out.append(d)
        try:
            with os.scandir(d) as it:
                stack += [e.path for e in it if e.name != "__pycache__" and e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
    return out


def _site_digest(dirs: Sequence[str]) -> str:
    """sha256 over the mtime of each of these directories: a file of an installed package removed,
    replaced or added changes its directory's mtime, and so does a directory added, removed or
    renamed in its parent (which is in the list: every directory is), so the answer is not given over
    a damaged env (install's check of the installed files then runs and repairs it). One stat per
    directory, no listing (a file edited in place: _files_digest). The stamp holds the list, so the
    mtimes alone, in its order, say what changed (-1: cannot be stat()ed)."""
    out = array("q")
    for d in dirs:
        try:
            out.append(os.stat(d).st_mtime_ns)
        except OSError:
            out.append(-1)
    return hashlib.sha256(out.tobytes()).hexdigest()


def recorded(env: Path) -> list[list[Any]]:
    """Every file the env's records list when the stamp is written, what install's check of the
    installed files stats: [[env-relative directory, [file name, ...]], ...] (~1 MB of JSON for a
    TF env where the full paths take ~3 MB, each read back on every answer)."""
    from tfgpu_install.env.integrity import recorded_relative

    by_dir: dict[str, list[str]] = {}
    for rel in recorded_relative(env):
        d, _, name = rel.rpartition("/")
        by_dir.setdefault(d, []).append(name)
    return [[d, names] for d, names in by_dir.items()]


_INO = (1 << 63) - 1  # an inode number in a signed 64-bit slot (they are far below it in practice)


def _files_digest(env: Path, files: Sequence[Sequence[Any]]) -> str:
    """sha256 over each recorded file's type, inode, size, mtime and ctime (-1: cannot be stat()ed);
    files: recorded()'s list. install's check of the installed files stats every recorded file and
    compares its size (and a shared library's identity for its remembered sha256): a file edited in
    place changes no directory's mtime, only its own stat. One stat per file, relative to its
    directory's descriptor (~15% less than walking each full path again), no read."""
    prefix = os.path.abspath(str(env)) + os.sep
    out = array("q")
    for d, names in files:
        try:
            fd = os.open(prefix + d, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            out.append(-2)  # the directory itself is gone: every file in it
            continue
        try:
            for name in names:
                try:
                    st = os.stat(name, dir_fd=fd, follow_symlinks=True)
                except OSError:
                    out.append(-1)
                    continue
                out.extend((st.st_mode, st.st_ino & _INO, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
        finally:
            os.close(fd)
    return hashlib.sha256(out.tobytes()).hexdigest()


def watch(ctx: Context, env: Path, dirs: Sequence[str], files: Sequence[Sequence[Any]]) -> dict[str, Any]:
    """Everything the no-op answer depends on, as plain data (compared for equality). dirs: the
    site-packages directories the stamp listed (site_dirs when it was written); files: the recorded
    files it listed (recorded)."""
    from tfgpu_install.env.fingerprint import env_fingerprint
    from tfgpu_install.env.state import env_state_dir

    state = env_state_dir(ctx, env)
    journal = state / "journal.jsonl"
    home = ctx.home
    pyenv = Path(ctx.environ.get("PYENV_ROOT") or home / ".pyenv") / "versions"
    looked_at = [journal, pyenv, home / ".conda" / "environments.txt",
                 ctx.sys_path("/usr/local"), ctx.sys_path("/opt"), ctx.sys_path("/etc/ld.so.cache")]
    looked_at += [Path(d) for d in (ctx.environ.get("PATH") or "").split(os.pathsep) if d]
    knowledge = _knowledge_dir(ctx)
    try:
        looked_at += sorted(knowledge.glob("*.yaml"))
    except OSError:
        pass
    return {
        "env": env_fingerprint(env),
        "site": _site_digest(dirs),
        "files": _files_digest(env, files),
        "verification": _verification(state / "verify.json"),
        "stats": {str(p): _stat(p) for p in looked_at},
        # Directories a step created change with what is inside them: files are what a user
        # edits. The tool's own records for the env are read above (`verify` rewrites its record).
        "touched": {p: _stat(Path(p)) for p in _touched(journal)
                    if not os.path.isdir(p) and not p.startswith(str(state) + os.sep)},
        "driver": _read(ctx.sys_path("/proc/driver/nvidia/version")),
        "devices": _nvidia_devices(ctx),
        "knowledge": str(knowledge),
    }


def answer(argv: Sequence[str], ctx: Context) -> Optional[dict[str, Any]]:
    """The stored no-op answer ({"data": ..., "message": ...}) when nothing it depends on
    changed; None (run the full path) otherwise. Never raises."""
    try:
        from tfgpu_install.guard.trust import problem

        key = invocation_key(argv, ctx.environ, os.getcwd())
        if problem(stamp_path(ctx, key), ctx.state_dir) is not None:
            return None  # a stamp another user could have written answers nothing
        with open(stamp_path(ctx, key), encoding="utf-8") as fh:
            stamp = json.load(fh)
        if not isinstance(stamp, dict) or stamp.get("format") != FORMAT or stamp.get("key") != key:
            return None
        env = Path(str(stamp["env"]))
        dirs, files = stamp["site_dirs"], stamp["files"]
        if not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs) or not isinstance(files, list):
            return None  # (a wrong item in files raises TypeError or ValueError below: no answer)
        if not env.is_dir() or stamp.get("watch") != watch(ctx, env, dirs, files):
            return None
        if not isinstance(stamp.get("data"), dict) or not isinstance(stamp.get("message"), str):
            return None
        return {"data": stamp["data"], "message": stamp["message"]}
    # A damaged stamp, a vanished file: the full path decides (a bug in here surfaces, not hidden).
    except (OSError, ValueError, LookupError, TypeError, AttributeError, TfgpuError):
        return None


def noop_data(data: Mapping[str, Any], fingerprinted: set[str]) -> dict[str, Any]:
    """What a full re-run says once this run's steps are in place: every step done (a
    fingerprinted one "unchanged"), nothing changed. A step's check() passes after its apply:
    that is the contract resume relies on."""
    steps = []
    for s in data.get("steps") or []:
        s = dict(s)
        if s.get("status") == "applied":
            unchanged = s.get("id") in fingerprinted
            s["status"], s["detail"] = ("unchanged", _UNCHANGED) if unchanged else ("done", "")
        steps.append(s)
    # What this run changed (its packages, a TensorFlow it replaced) is this run's news: a re-run changes
    # neither, and the full path then leaves both keys out
    kept = {k: v for k, v in data.items() if k not in RUN_CHANGES}
    return {**kept, "changed": False, "steps": steps}


RUN_CHANGES = ("packages", "tensorflow_change")


def remember(argv: Sequence[str], ctx: Context, data: Mapping[str, Any], message: str) -> None:
    """After a successful install (not a dry run): the stamp the next identical run answers from.
    Best effort: a full disk or a read-only state dir only costs the next run its fast path."""
    from tfgpu_install.env.journal import Journal, current_epoch
    from tfgpu_install.env.state import env_state_dir
    from tfgpu_install.files import atomic_write

    try:
        env = Path(str(data["env"]))
        key = invocation_key(argv, ctx.environ, os.getcwd())
        journal = Journal(env_state_dir(ctx, env) / "journal.jsonl")
        fingerprinted = {str(e.step) for e in current_epoch(journal.entries())
                         if e.event == "done" and e.data.get("fingerprint")}
        dirs, files = site_dirs(env), recorded(env)
        stamp = {"format": FORMAT, "key": key, "env": str(env), "site_dirs": dirs, "files": files,
                 "watch": watch(ctx, env, dirs, files), "data": noop_data(data, fingerprinted), "message": message}
        atomic_write(stamp_path(ctx, key), json.dumps(stamp, default=str).encode())
    except (OSError, ValueError, LookupError, TypeError, AttributeError, TfgpuError):  # no stamp: the next run is full
        try:
            os.unlink(stamp_path(ctx, invocation_key(argv, ctx.environ, os.getcwd())))
        except OSError:
            pass
