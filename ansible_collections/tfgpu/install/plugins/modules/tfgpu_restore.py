#!/usr/bin/python
# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: tfgpu_restore
short_description: Restore one known-good snapshot on this host (tfgpu-install snapshot restore)
description:
  - The host is checked against the snapshot's contract first. A host that cannot meet it fails with
    C(error=incompatible-host), C(exit_code=12) and every reason in C(reasons); the other hosts go on.
  - C(changed) is true only when a step applied. Check mode runs C(restore --dry-run) (changed when a
    step would run).
  - I(offline) is a C(snapshot bundle) directory on the node; the env's packages come from it alone.
options:
  snapshot:
    type: path
    required: true
    description: "the snapshot file on the node"
  env:
    type: path
    description: "the env to restore into (default: the snapshot's own path)"
  offline:
    type: path
    description: "a bundle directory on the node (restore --offline)"
extends_documentation_fragment: [tfgpu.install.common, tfgpu.install.common.provision]
"""

RETURN = r"""
changed: {description: true when a step applied, type: bool}
snapshot: {description: the restored snapshot's id, type: str}
identical: {description: the env matches the snapshot after the restore, type: bool}
reasons: {description: why the host was refused (exit 12), type: list}
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

INCOMPATIBLE_HOST = 12


def _reasons(message):
    """The refusal's reasons: tfgpu-install lists them one per line, as "  - reason"."""
    return [line.strip()[2:] for line in (message or "").splitlines() if line.strip().startswith("- ")]


def main():
    spec = dict(COMMON_ARGS)
    spec.update(
        snapshot=dict(type="path", required=True),
        env=dict(type="path", required=False),
        offline=dict(type="path", required=False),
        allow_cpu=dict(type="bool", default=False),
        extra_args=dict(type="list", elements="str", default=[]),
    )
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    p = module.params
    tool, bootstrapped = bootstrap(module)
    host = host_facts(module, tool)
    args = ["snapshot", "restore", p["snapshot"], "-y"]
    if module.check_mode:
        args.append("--dry-run")
    if p.get("env"):
        args += ["--env", p["env"]]
    if p.get("offline"):
        args += ["--offline", p["offline"]]
    elif p.get("index_url"):
        args += ["--index-url", p["index_url"]]
    if p["allow_cpu"]:
        args.append("--allow-cpu")
    rc, doc, out, err = run_tool(module, tool, args + list(p["extra_args"]))
    if rc != 0:
        refused = rc == INCOMPATIBLE_HOST
        reasons = _reasons((doc or {}).get("message")) if refused else []
        fail(module, rc, doc, out, err, host=host, refused=refused, reasons=reasons, restored=False)
    doc = doc or {}
    applied = steps_applied(doc)
    pending = [s.get("id") for s in doc.get("steps") or [] if s.get("status") == "pending"]
    module.exit_json(seconds=elapsed(), changed=bool(pending) if module.check_mode else bool(applied),
                     applied=applied, snapshot=doc.get("snapshot"), env=doc.get("env"),
                     identical=doc.get("identical"), dry_run=bool(doc.get("dry_run")), steps=doc.get("steps"),
                     warnings=doc.get("warnings"), restored=not module.check_mode, host=host,
                     bootstrapped=bootstrapped)


if __name__ == "__main__":
    main()
