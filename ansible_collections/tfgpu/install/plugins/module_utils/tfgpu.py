# -*- coding: utf-8 -*-
"""What the tfgpu modules share: bootstrapping tfgpu-install on the node from a wheel the controller
shipped (into its own venv), running it with --json, and mapping its result to Ansible's contract.

The node needs no internet: the tool's dependencies come from the package index (or a wheel
directory) the play gives it. A re-run with the same wheel skips the bootstrap (its sha256 is
recorded next to the venv). Check mode writes nothing on the node: no venv, no stamp (a missing
tool is reported as a change a real run would make)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import time

try:
    from urllib.parse import urlparse
except ImportError:  # Python 2 on an old node
    from urlparse import urlparse  # type: ignore

# The module starts when this is imported: `seconds` in every result counts from here.
_STARTED = time.time()

# Module arguments every tfgpu module takes (merged into each module's argument_spec).
COMMON_ARGS = dict(
    wheel=dict(type="path", required=False),
    tool_venv=dict(type="path", default="~/.local/share/tfgpu-install/tool"),
    python=dict(type="str", default="python3"),
    index_url=dict(type="str", required=False),
    find_links=dict(type="path", required=False),
    # Named so they do not shadow the task keywords `environment` and `timeout` (the old names stay aliases).
    tool_env=dict(type="dict", default={}, aliases=["environment"]),
    tool_timeout=dict(type="int", default=1800, aliases=["timeout"]),
)

# The options of the modules that provision an env (tfgpu_install, tfgpu_restore).
PROVISION_ARGS = dict(
    allow_cpu=dict(type="bool", default=False),
    extra_args=dict(type="list", elements="str", default=[]),
    # What `tfgpu-install fleet` passes so a change is reported even when its result was lost on the way
    # (a network partition): this run's id, and the id of the last run whose result the controller got.
    run_id=dict(type="str", required=False),
    reported_run=dict(type="str", required=False, default=""),
)

# Words in an error that name its real cause (checked before the generic hints).
_CAUSES = (
    ("Read-only file system", "read-only-fs", "the node's filesystem is read-only there: point tool_venv (and "
     "the env) at a writable directory, or remount it read-write"),
    ("No space left on device", "disk-full", "free space on the node (the tool venv, the env and uv's cache need "
     "it), or point tool_venv and the env at a larger filesystem"),
    ("Disk quota exceeded", "disk-full", "the user's disk quota on the node is full: free space or raise it"),
    ("Permission denied", "permission-denied", "the ssh user cannot write there: point tool_venv at a directory "
     "it owns"),
)

# How much of a failed command's output goes back to the controller.
_TAIL = 4000


def elapsed():
    return round(time.time() - _STARTED, 1)


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _env(params):
    env = dict(os.environ)
    env.update({str(k): str(v) for k, v in (params.get("tool_env") or {}).items()})
    return env


def cause(text, default_error, default_hint):
    """(error reference, hint) for a failed command: its real cause when the output names one."""
    for words, error, hint in _CAUSES:
        if words in (text or ""):
            return error, hint
    return default_error, default_hint


def write_temp(module, name, text):
    """A file in Ansible's own per-task temp dir on the node (removed when the module ends)."""
    path = os.path.join(module.tmpdir, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def bootstrap(module):
    """The tool's path on this node; (path, bootstrapped?). Installs the shipped wheel into the
    tool venv when it is missing or a different wheel was shipped."""
    p = module.params
    venv = os.path.expanduser(p["tool_venv"])
    tool = os.path.join(venv, "bin", "tfgpu-install")
    wheel = p.get("wheel")
    if not wheel:
        if os.path.exists(tool):
            return tool, False
        module.fail_json(msg="tfgpu-install is not on this node and no wheel was given",
                         error="tool-missing", hint="pass wheel: (the role ships dist/tfgpu_install-*.whl)")
    stamp = os.path.join(venv, ".tfgpu-wheel-sha256")
    digest = _sha256(wheel) if os.path.exists(wheel) else None
    if os.path.exists(tool) and os.path.exists(stamp) and digest:
        with open(stamp) as f:
            if f.read().strip() == digest:
                return tool, False
    if module.check_mode:
        # A real run would (re)install the tool; check mode writes nothing. The plan runs with the
        # tool already there, if any; a node without one has nothing to plan with.
        return (tool if os.path.exists(tool) else None), True
    if digest is None:
        module.fail_json(msg="the tool's wheel %s is not on this node" % wheel, error="tool-missing",
                         hint="ship it first (the tfgpu.install.tfgpu role does)")
    env = _env(p)
    rc, out, err = module.run_command([p["python"], "-m", "venv", venv], environ_update=env)
    if rc != 0:
        text = err or out
        if "ensurepip" in text or "No module named venv" in text:
            error, hint = "tool-bootstrap", "install python3-venv on the node, or set python:"
        else:
            error, hint = cause(text, "tool-bootstrap", "install python3-venv on the node, or set python:")
        module.fail_json(msg="could not create the tool venv %s: %s" % (venv, text[-_TAIL:]),
                         error=error, hint=hint)
    pip = [os.path.join(venv, "bin", "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    if p.get("find_links"):
        pip += ["--no-index", "--find-links", p["find_links"]]
    elif p.get("index_url"):
        pip += ["--index-url", p["index_url"]]
        if p["index_url"].startswith("http://"):
            # The play named this plain-http index (a private mirror): pip refuses it unless trusted.
            pip += ["--trusted-host", urlparse(p["index_url"]).hostname or ""]
    rc, out, err = module.run_command(pip + [wheel], environ_update=env)
    if rc != 0:
        error, hint = cause(err or out, "tool-bootstrap", "check index_url/find_links: the node installs the "
                            "tool's dependencies from there")
        module.fail_json(msg="could not install %s into %s: %s"
                         % (os.path.basename(wheel), venv, (err or out)[-_TAIL:]), error=error, hint=hint)
    with open(stamp + ".tmp", "w") as f:
        f.write(digest + "\n")
    os.replace(stamp + ".tmp", stamp)
    return tool, True


def run_tool(module, tool, args):
    """(rc, the --json document or None, stdout, stderr)."""
    p = module.params
    env = _env(p)
    argv = [tool] + list(args) + ["--json"]
    # run_command has no timeout of its own: coreutils' timeout bounds a wedged run.
    if p.get("tool_timeout"):
        argv = ["timeout", "--kill-after=10", str(p["tool_timeout"])] + argv
    rc, out, err = module.run_command(argv, environ_update=env)
    doc = None
    try:
        doc = json.loads(out) if out.strip() else None
    except ValueError:
        doc = None
    return rc, doc, out, err


def fail(module, rc, doc, out, err, **extra):
    """failed, with our error reference, message and hint (the --json error document)."""
    doc = doc if isinstance(doc, dict) else {}
    message = doc.get("message") or ("tfgpu-install exited %d: %s" % (rc, (err or out)[-_TAIL:]))
    error, hint = doc.get("error"), doc.get("hint")
    if not error:
        error, hint = cause(message, "tool-failed", hint)
    module.fail_json(msg=message, error=error, hint=hint,
                     exit_code=rc, stderr_tail=(err or "")[-_TAIL:], seconds=elapsed(), **extra)


def host_facts(module, tool):
    """driver, GPUs (with compute capability), glibc and machine id of this node (probe --json; read-only)."""
    facts = {"machine_id": None, "driver": None, "gpus": [], "gpu_details": [], "glibc": None, "cuda_driver": None}
    doc = run_tool(module, tool, ["probe"])[1] if tool else None
    try:
        with open("/etc/machine-id") as f:
            facts["machine_id"] = f.read().strip() or None
    except (IOError, OSError):
        pass
    # probe exits 3 (NO_GPU) on a host without a usable GPU and still prints what it found.
    if isinstance(doc, dict) and "driver" in doc:
        facts["driver"] = (doc.get("driver") or {}).get("version")
        gpus = [g for g in doc.get("gpus") or [] if isinstance(g, dict)]
        facts["gpus"] = [g.get("name") for g in gpus]
        facts["gpu_details"] = [{"name": g.get("name"), "compute_capability": g.get("compute_capability"),
                                 "memory_mib": g.get("memory_mib")} for g in gpus]
        facts["glibc"] = (doc.get("host") or {}).get("glibc")
        facts["cuda_driver"] = (doc.get("driver") or {}).get("max_cuda")
    return facts


def steps_applied(doc):
    """The ids of the steps that applied (or undid) something in this run: `changed` is true only
    when there is one. Step states: applied | undone | done | unchanged | pending | failed."""
    steps = doc.get("steps") if isinstance(doc, dict) else None
    return [s.get("id") for s in steps or [] if isinstance(s, dict) and s.get("status") in ("applied", "undone")]


def applied_or_unknown(doc):
    """A failed run's applied steps when its JSON lists its steps, else None (unknown)."""
    return steps_applied(doc) if isinstance(doc, dict) and isinstance(doc.get("steps"), list) else None


def exit_without_tool(module, host, **extra):
    """Check mode on a node without the tool: nothing to plan with, and a real run would bootstrap it."""
    module.exit_json(changed=True, planned=False, bootstrapped=False, would_bootstrap=True, host=host,
                     seconds=elapsed(), dry_run=True, applied=[], pending=["tool.bootstrap"],
                     msg="tfgpu-install is not on this node: a real run would bootstrap it, then plan "
                     "(check mode writes nothing, so there is no plan yet)", **extra)


def stack_diff(before, after):
    """Diff mode: TensorFlow / CUDA / cuDNN before (last verified) and after (chosen), one line each."""
    def text(stack):
        return "".join("%s: %s\n" % (k, stack.get(k) or "-") for k in ("tensorflow", "cuda", "cudnn"))
    return {"before": text(before or {}), "after": text(after or {}),
            "before_header": "last verified", "after_header": "chosen"}


# The node's record of the fleet runs that changed an env, per env: what a run applied stays "unreported"
# until the controller passes that run's id back as reported_run (it got the row).
_LEDGER = ".tfgpu-fleet-ledger.json"
_LEDGER_RUNS = 20  # the run ids one carried change keeps (the oldest go first)


def _ledger_path(module):
    return os.path.join(os.path.expanduser(module.params["tool_venv"]), _LEDGER)


def _read_ledger(path):
    try:
        with open(path) as f:
            doc = json.loads(f.read(1 << 20))
    except (IOError, OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _write_ledger(path, ledger):
    """Best effort: a node that cannot keep it (read-only tool venv) only loses this late report."""
    try:
        with open(path + ".tmp", "w") as f:
            json.dump(ledger, f)
        os.replace(path + ".tmp", path)
    except (IOError, OSError):
        pass


def _unreported(entry):
    """What an earlier run (and the runs it carried) changed that the controller never heard of:
    {"runs": [...], "applied": [...] or None when a run was cut off before it could say}; None if nothing."""
    if not isinstance(entry, dict) or not isinstance(entry.get("run_id"), str):
        return None
    carried = entry.get("carried") if isinstance(entry.get("carried"), dict) else {}
    runs = [r for r in carried.get("runs") or [] if isinstance(r, str)] + [entry["run_id"]]
    applied = entry.get("applied")
    earlier = carried.get("applied") if carried else []
    if applied is None or earlier is None or not isinstance(applied, list) or not isinstance(earlier, list):
        merged = None
    else:
        merged = [str(a) for a in earlier] + [str(a) for a in applied if str(a) not in earlier]
        if not merged:
            return None
    return {"runs": runs[-_LEDGER_RUNS:], "applied": merged}


def ledger_start(module, key):
    """Before a real provisioning run: record it as started (applied unknown until it ends) and return
    the change an earlier run made that the controller did not get (None: nothing unreported). A no-op
    outside `fleet` (no run_id) and in check mode."""
    p = module.params
    if not p.get("run_id") or module.check_mode:
        return None
    path = _ledger_path(module)
    ledger = _read_ledger(path)
    prev = ledger.get(key)
    unreported = None
    if isinstance(prev, dict) and prev.get("run_id") != (p.get("reported_run") or ""):
        unreported = _unreported(prev)
    ledger[key] = {"run_id": p["run_id"], "applied": None, "at": time.time(), "carried": unreported}
    _write_ledger(path, ledger)
    return unreported


def ledger_finish(module, key, applied, unreported):
    """After the run: what it applied (None: unknown, e.g. the tool failed without saying)."""
    p = module.params
    if not p.get("run_id") or module.check_mode:
        return {}
    path = _ledger_path(module)
    ledger = _read_ledger(path)
    ledger[key] = {"run_id": p["run_id"], "applied": None if applied is None else list(applied),
                   "at": time.time(), "carried": unreported}
    _write_ledger(path, ledger)
    out = {"ledger_run": p["run_id"]}
    if unreported is not None:
        out["unreported"] = unreported
    return out
