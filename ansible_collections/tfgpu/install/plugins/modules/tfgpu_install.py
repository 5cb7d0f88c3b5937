#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: tfgpu-install developers
# MIT License (see LICENSE)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: tfgpu_install
short_description: A verified TensorFlow GPU environment on this host (tfgpu-install install --json)
version_added: 0.1.0
author: tfgpu-install developers (@tfgpu-install)
description:
  - Bootstraps tfgpu-install from a wheel the controller shipped into its own venv (no internet needed
    beyond O(index_url) or O(find_links)), then runs C(tfgpu-install install -y --json).
  - C(changed) is true only when a step applied.
  - Check mode runs C(install --dry-run) with the tool already on the node and writes nothing on the node
    (no tool venv, no env); on a node without the tool it reports C(changed) (a real run would bootstrap
    it) and RV(planned=false).
  - On failure, C(error), C(msg) and C(hint) are tfgpu-install's error reference, message and fix;
    C(exit_code) its documented exit code.
options:
  mode:
    type: str
    choices: [install, status, plan]
    default: install
    description:
      - V(install) provisions and verifies.
      - V(status) is read-only C(status --json) (the last verified TF, CUDA and cuDNN).
      - V(plan) bootstraps the tool if needed and runs C(install --dry-run); the env is not touched
        (C(changed) only when the tool venv was installed); what C(fleet install --same) plans with.
  profile:
    type: str
    default: stable
    description: A profile name, or a policy file on the node.
  profile_text:
    type: str
    description:
      - A policy file's content (written to Ansible's per-task temp dir on the node, removed afterwards).
      - Takes precedence over O(profile).
  env:
    type: path
    description: The target env (default is the tool's own default path).
extends_documentation_fragment:
  - tfgpu.install.common
  - tfgpu.install.common.provision
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Runs C(install --dry-run); nothing is written on the node.
  diff_mode:
    support: full
    details: The TensorFlow, CUDA and cuDNN versions before (last verified) and after (chosen).
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: TensorFlow with GPU support, verified, from a shipped wheel and a private index
  tfgpu.install.tfgpu_install:
    wheel: /tmp/tfgpu_install-0.1.0-py3-none-any.whl
    index_url: http://mirror.internal:8080/simple/
    profile: stable
  register: tf

- name: What the env holds now (read-only)
  tfgpu.install.tfgpu_install:
    mode: status
"""

RETURN = r"""
applied:
  description: Ids of the steps that applied (or undid) something.
  returned: mode is install or plan
  type: list
  elements: str
  sample: [env.create, packages.install, verify.run]
pending:
  description: Ids of the steps that would run (check mode, plan).
  returned: mode is install or plan
  type: list
  elements: str
  sample: [env.create]
env:
  description: The env's path on the node.
  returned: success
  type: str
  sample: /home/user/.local/share/tfgpu-install/envs/tf-2.16
tensorflow:
  description: The chosen TensorFlow, CUDA, cuDNN and Python (status, the last verified ones).
  returned: success
  type: dict
  sample: {tensorflow: "2.16.1", cuda: "12.3", cudnn: "8.9", python: "3.11"}
resolution:
  description: The resolution (choice, reasons, rejected).
  returned: mode is install or plan
  type: dict
steps:
  description: Each step and its state.
  returned: mode is install or plan
  type: list
  elements: dict
dry_run:
  description: The run was a plan (check mode or V(plan)).
  returned: mode is install or plan
  type: bool
ledger_run:
  description: With O(run_id), the run id the node's ledger now holds (the controller passes it back as
    O(reported_run)).
  returned: a real run with O(run_id)
  type: str
unreported:
  description: What earlier runs changed whose result never reached the controller (a partition, a
    killed controller); C(applied) is null when such a run was cut off before it could say.
  returned: when there is such a change
  type: dict
  sample: {runs: ["3f2a9c"], applied: [env.create, packages.install, verify.run]}
planned:
  description: False when check mode had no tool on the node to plan with.
  returned: always
  type: bool
gpu_verified:
  description: TensorFlow ran on the GPU during verification (false - only the CPU was checked, C(--allow-cpu);
    null - not known).
  returned: mode is install or status
  type: bool
layers_passed:
  description: The names of the verification layers that passed (from the env's verification record).
  returned: success
  type: list
  elements: str
  sample: [python, tensorflow]
verified:
  description: The env passed verification (in this run or an earlier one; status, the last record).
  returned: success
  type: bool
status:
  description: C(tfgpu-install status --json) (steps, verification).
  returned: mode is status
  type: dict
host:
  description: machine_id, driver, gpus, gpu_details (name, compute_capability, memory_mib), glibc, cuda_driver.
  returned: always
  type: dict
bootstrapped:
  description: The tool venv was (re)installed in this run.
  returned: always
  type: bool
would_bootstrap:
  description: Check mode only, a real run would (re)install the tool venv.
  returned: check mode
  type: bool
seconds:
  description: Seconds the module ran.
  returned: always
  type: float
  sample: 41.2
error:
  description: tfgpu-install's error reference (or the cause found in the output, e.g. read-only-fs, disk-full).
  returned: failure
  type: str
  sample: bad-input
hint:
  description: The fix.
  returned: failure
  type: str
exit_code:
  description: tfgpu-install's documented exit code.
  returned: failure
  type: int
  sample: 5
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.tfgpu.install.plugins.module_utils.tfgpu import (
    COMMON_ARGS,
    PROVISION_ARGS,
    applied_or_unknown,
    bootstrap,
    elapsed,
    exit_without_tool,
    fail,
    host_facts,
    ledger_finish,
    ledger_start,
    run_tool,
    stack_diff,
    steps_applied,
    write_temp,
)


def _install_args(module, dry_run):
    p = module.params
    profile = write_temp(module, "profile.yaml", p["profile_text"]) if p.get("profile_text") else p["profile"]
    args = ["install", "-y", "--profile", profile]
    if dry_run:
        args.append("--dry-run")
    if p.get("env"):
        args += ["--env", p["env"]]
    if p["allow_cpu"]:
        args.append("--allow-cpu")
    if p.get("index_url"):
        args += ["--index-url", p["index_url"]]
    return args + list(p["extra_args"])


def _status(module, tool):
    p = module.params
    rc, doc, out, err = run_tool(module, tool, ["status"] + (["--env", p["env"]] if p.get("env") else []))
    return rc, doc if isinstance(doc, dict) else None, out, err


def _last_verified(doc):
    v = (doc or {}).get("verification") or {}
    return {k: v.get(k) for k in ("tensorflow", "cuda", "cudnn")} if v.get("ok") else {}


def _argument_spec():
    spec = dict(COMMON_ARGS)
    spec.update(PROVISION_ARGS)
    spec.update(
        mode=dict(type="str", choices=["install", "status", "plan"], default="install"),
        profile=dict(type="str", default="stable"),
        profile_text=dict(type="str", required=False),
        env=dict(type="path", required=False),
    )
    return spec


def _exit_status(module, tool, host, bootstrapped, would):
    """mode=status: the env's last verified stack, read-only (exits)."""
    rc, doc, out, err = _status(module, tool)
    if rc != 0:
        fail(module, rc, doc, out, err, host=host)
    stack = _last_verified(doc)
    module.exit_json(seconds=elapsed(), changed=False, status=doc, host=host, bootstrapped=bootstrapped,
                     would_bootstrap=would, planned=True, env=(doc or {}).get("env"),
                     tensorflow={k: stack.get(k) for k in ("tensorflow", "cuda", "cudnn", "python")},
                     **_verification(doc))


def _verification(status_doc):
    """verified, gpu_verified (False: only the CPU was checked) and the layers that passed, from
    `status --json`'s verification record (None where it does not say)."""
    v = (status_doc or {}).get("verification") or {}
    ok = bool(v.get("ok"))
    layers = v.get("layers_passed")
    return dict(verified=ok, gpu_verified=bool(v.get("gpu_verified")) if ok and "gpu_verified" in v else None,
                layers_passed=[str(x) for x in layers] if ok and isinstance(layers, list) else [])


def _steps_with(doc, key, wanted):
    """`key` of each of the tool's steps (dicts) whose `wanted` test passes."""
    return [s.get(key) for s in doc.get("steps") or [] if isinstance(s, dict) and wanted(s)]


def _verified(doc):
    """exit 0 after a real run means the verify step passed, now or in an earlier run (unchanged env)."""
    verify_states = _steps_with(doc, "status", lambda s: s.get("id") == "verify.run")
    return not doc.get("dry_run") and any(v in ("applied", "done", "unchanged") for v in verify_states)


def _changed(mode, check_mode, pending, applied, bootstrapped, would):
    if mode == "plan":
        return bootstrapped  # the env is untouched; the tool venv may have been (re)installed
    if check_mode:
        return bool(pending) or would
    return bool(applied) or bootstrapped


def main():
    module = AnsibleModule(argument_spec=_argument_spec(), supports_check_mode=True)
    p = module.params
    tool, bootstrapped = bootstrap(module)
    would = bootstrapped and module.check_mode
    bootstrapped = bootstrapped and not module.check_mode
    host = host_facts(module, tool)
    if tool is None:
        exit_without_tool(module, host, tensorflow={})
    if p["mode"] == "status":
        _exit_status(module, tool, host, bootstrapped, would)
    before = _last_verified(_status(module, tool)[1]) if module._diff else {}
    dry_run = module.check_mode or p["mode"] == "plan"
    ledger_key = p.get("env") or ""
    unreported = None if dry_run else ledger_start(module, ledger_key)
    rc, doc, out, err = run_tool(module, tool, _install_args(module, dry_run))
    if rc != 0:
        told = {} if dry_run else ledger_finish(module, ledger_key, applied_or_unknown(doc), unreported)
        fail(module, rc, doc, out, err, host=host, bootstrapped=bootstrapped, **told)
    doc = doc or {}
    applied = steps_applied(doc)
    told = {} if dry_run else ledger_finish(module, ledger_key, applied, unreported)
    # Check mode reports what a real run would do: changed when a step is pending (or the tool is stale).
    pending = _steps_with(doc, "id", lambda s: s.get("status") == "pending")
    choice = (doc.get("resolution") or {}).get("choice") or {}
    after = {k: choice.get(k) for k in ("tensorflow", "cuda", "cudnn", "python")}
    result = dict(
        seconds=elapsed(),
        # An earlier run's change whose result never reached the controller is this run's to report.
        changed=_changed(p["mode"], module.check_mode, pending, applied, bootstrapped, would) or bool(told.get(
            "unreported")),
        applied=applied,
        pending=pending,
        env=doc.get("env"),
        tensorflow=after,
        resolution=doc.get("resolution"),
        steps=doc.get("steps"),
        dry_run=bool(doc.get("dry_run")),
        gpu_verified=doc.get("gpu_verified"),
        verified=bool(_verified(doc)),
        layers_passed=[],
        planned=True,
        host=host,
        bootstrapped=bootstrapped,
        would_bootstrap=would,
        **told
    )
    if result["verified"]:
        # What the verification checked (GPU or CPU only, which layers passed), from its own record.
        checked = _verification(_status(module, tool)[1])
        if checked["verified"]:
            result.update(gpu_verified=checked["gpu_verified"], layers_passed=checked["layers_passed"])
    if module._diff:
        result["diff"] = stack_diff(before, after if (pending or applied) else before)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
