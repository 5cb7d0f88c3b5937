#!/usr/bin/python
# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: tfgpu_install
short_description: A verified TensorFlow GPU environment on this host (tfgpu-install install --json)
description:
  - Bootstraps tfgpu-install from a wheel the controller shipped into its own venv (no internet needed
    beyond I(index_url) or I(find_links)), then runs C(tfgpu-install install -y --json).
  - C(changed) is true only when a step applied. Check mode runs C(install --dry-run) (the plan and each
    step's state; the env is not touched; the tool venv is still bootstrapped so the plan can run) and
    reports C(changed) when a step would run.
  - On failure, C(error), C(msg) and C(hint) are tfgpu-install's error reference, message and fix;
    C(exit_code) its documented exit code.
options:
  mode:
    type: str
    choices: [install, status]
    default: install
    description: "status: read-only C(status --json)"
  profile:
    type: str
    default: stable
    description: "a profile name or a policy file on the node"
  env:
    type: path
    description: "the target env (default: the tool's own default path)"
extends_documentation_fragment: [tfgpu.install.common, tfgpu.install.common.provision]
"""

RETURN = r"""
changed: {description: true when a step applied, type: bool}
applied: {description: ids of the steps that applied, type: list}
tensorflow: {description: "chosen TF / CUDA / cuDNN / Python", type: dict}
resolution: {description: the resolution (choice, reasons, rejected), type: dict}
steps: {description: each step and its state, type: list}
verified: {description: the env passed verification (now or before), type: bool}
host: {description: machine_id, driver, gpus, glibc of this host, type: dict}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.tfgpu.install.plugins.module_utils.tfgpu import (
    COMMON_ARGS,
    bootstrap,
    elapsed,
    fail,
    host_facts,
    run_tool,
    steps_applied,
)


def _install_args(p, check_mode):
    args = ["install", "-y", "--profile", p["profile"]]
    if check_mode:
        args.append("--dry-run")
    if p.get("env"):
        args += ["--env", p["env"]]
    if p["allow_cpu"]:
        args.append("--allow-cpu")
    if p.get("index_url"):
        args += ["--index-url", p["index_url"]]
    return args + list(p["extra_args"])


def main():
    spec = dict(COMMON_ARGS)
    spec.update(
        mode=dict(type="str", choices=["install", "status"], default="install"),
        profile=dict(type="str", default="stable"),
        env=dict(type="path", required=False),
        allow_cpu=dict(type="bool", default=False),
        extra_args=dict(type="list", elements="str", default=[]),
    )
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    p = module.params
    tool, bootstrapped = bootstrap(module)
    host = host_facts(module, tool)
    if p["mode"] == "status":
        args = ["status"] + (["--env", p["env"]] if p.get("env") else [])
        rc, doc, out, err = run_tool(module, tool, args)
        if rc != 0:
            fail(module, rc, doc, out, err, host=host)
        module.exit_json(seconds=elapsed(), changed=False, status=doc, host=host, bootstrapped=bootstrapped,
                         verified=bool(((doc or {}).get("verification") or {}).get("ok")))
    rc, doc, out, err = run_tool(module, tool, _install_args(p, module.check_mode))
    if rc != 0:
        fail(module, rc, doc, out, err, host=host, bootstrapped=bootstrapped)
    doc = doc or {}
    applied = steps_applied(doc)
    # Check mode reports what a real run would do: changed when a step is pending.
    pending = [s.get("id") for s in doc.get("steps") or [] if s.get("status") == "pending"]
    choice = (doc.get("resolution") or {}).get("choice") or {}
    # exit 0 after a real run means the verify step passed, now or in an earlier run (unchanged env).
    verify_states = [s.get("status") for s in doc.get("steps") or [] if s.get("id") == "verify.run"]
    verified = not doc.get("dry_run") and any(v in ("applied", "done", "unchanged") for v in verify_states)
    module.exit_json(
        seconds=elapsed(),
        changed=bool(pending) if doc.get("dry_run") else bool(applied),
        applied=applied,
        pending=pending,
        env=doc.get("env"),
        tensorflow={k: choice.get(k) for k in ("tensorflow", "cuda", "cudnn", "python")},
        resolution=doc.get("resolution"),
        steps=doc.get("steps"),
        dry_run=bool(doc.get("dry_run")),
        gpu_verified=doc.get("gpu_verified"),
        verified=bool(verified),
        host=host,
        bootstrapped=bootstrapped,
    )


if __name__ == "__main__":
    main()
