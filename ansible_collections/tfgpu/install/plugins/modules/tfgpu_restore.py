#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: tfgpu-install developers
# MIT License (see LICENSE)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: tfgpu_restore
short_description: Restore one known-good snapshot on this host (tfgpu-install snapshot restore)
version_added: 0.1.0
author: tfgpu-install developers (@tfgpu-install)
description:
  - The host is checked against the snapshot's contract first. A host that cannot meet it fails with
    C(error=incompatible-host), C(exit_code=12) and every reason in RV(reasons); the other hosts go on.
  - C(changed) is true only when a step applied.
  - Check mode runs C(restore --dry-run) with the tool already on the node and writes nothing on the node;
    on a node without the tool it reports C(changed) and RV(planned=false).
  - O(offline) is a C(snapshot bundle) directory on the node; the env's packages come from it alone.
options:
  snapshot:
    type: path
    description: The snapshot file on the node. One of O(snapshot) and O(snapshot_text) is required.
  snapshot_text:
    type: str
    description:
      - The snapshot's content (written to Ansible's per-task temp dir on the node, removed afterwards).
  env:
    type: path
    description: The env to restore into (default is the snapshot's own path).
  offline:
    type: path
    description: A bundle directory on the node (C(restore --offline)).
extends_documentation_fragment:
  - tfgpu.install.common
  - tfgpu.install.common.provision
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Runs C(restore --dry-run); nothing is written on the node.
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: The colleague's known-good env, exactly
  tfgpu.install.tfgpu_restore:
    snapshot_text: "{{ lookup('ansible.builtin.file', 'known-good.tfgpu.yaml') }}"
    wheel: /tmp/tfgpu_install-0.1.0-py3-none-any.whl
    index_url: http://mirror.internal:8080/simple/
  register: restored
"""

RETURN = r"""
snapshot:
  description: The restored snapshot's id.
  returned: success
  type: str
env:
  description: The env's path on the node.
  returned: success
  type: str
identical:
  description: The env matches the snapshot after the restore.
  returned: success
  type: bool
restored:
  description: The env was restored in this run (false in check mode and on failure).
  returned: always
  type: bool
applied:
  description: Ids of the steps that applied.
  returned: success
  type: list
  elements: str
pending:
  description: Ids of the steps that would run.
  returned: success
  type: list
  elements: str
steps:
  description: Each step and its state.
  returned: success
  type: list
  elements: dict
dry_run:
  description: The run was a plan (check mode).
  returned: success
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
reasons:
  description: Why the host was refused (exit 12), one reason each.
  returned: failure
  type: list
  elements: str
refused:
  description: The host cannot meet the snapshot's contract.
  returned: failure
  type: bool
host:
  description: machine_id, driver, gpus, gpu_details, glibc, cuda_driver of this host.
  returned: always
  type: dict
bootstrapped:
  description: The tool venv was (re)installed in this run.
  returned: always
  type: bool
seconds:
  description: Seconds the module ran.
  returned: always
  type: float
error:
  description: tfgpu-install's error reference (or the cause found in the output).
  returned: failure
  type: str
hint:
  description: The fix.
  returned: failure
  type: str
exit_code:
  description: tfgpu-install's documented exit code.
  returned: failure
  type: int
  sample: 12
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
    steps_applied,
    write_temp,
)

INCOMPATIBLE_HOST = 12


def _reasons(message):
    """The refusal's reasons: tfgpu-install lists them one per line, as "  - reason"."""
    return [line.strip()[2:] for line in (message or "").splitlines() if line.strip().startswith("- ")]


def main():
    spec = dict(COMMON_ARGS)
    spec.update(PROVISION_ARGS)
    spec.update(
        snapshot=dict(type="path", required=False),
        snapshot_text=dict(type="str", required=False),
        env=dict(type="path", required=False),
        offline=dict(type="path", required=False),
    )
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True,
                           required_one_of=[("snapshot", "snapshot_text")],
                           mutually_exclusive=[("snapshot", "snapshot_text")])
    p = module.params
    tool, bootstrapped = bootstrap(module)
    would = bootstrapped and module.check_mode
    bootstrapped = bootstrapped and not module.check_mode
    host = host_facts(module, tool)
    if tool is None:
        exit_without_tool(module, host, restored=False)
    snapshot = write_temp(module, "restore.tfgpu.yaml", p["snapshot_text"]) if p.get("snapshot_text") \
        else p["snapshot"]
    args = ["snapshot", "restore", snapshot, "-y"]
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
    ledger_key = p.get("env") or ""
    unreported = ledger_start(module, ledger_key)
    rc, doc, out, err = run_tool(module, tool, args + list(p["extra_args"]))
    if rc != 0:
        refused = rc == INCOMPATIBLE_HOST
        reasons = _reasons((doc or {}).get("message")) if refused else []
        told = ledger_finish(module, ledger_key, applied_or_unknown(doc), unreported)
        fail(module, rc, doc, out, err, host=host, refused=refused, reasons=reasons, restored=False, **told)
    doc = doc or {}
    applied = steps_applied(doc)
    told = ledger_finish(module, ledger_key, applied, unreported)
    pending = [s.get("id") for s in doc.get("steps") or [] if isinstance(s, dict) and s.get("status") == "pending"]
    # An earlier run's change whose result never reached the controller is this run's to report.
    changed = (bool(pending) or would) if module.check_mode else (
        bool(applied) or bootstrapped or bool(told.get("unreported")))
    module.exit_json(seconds=elapsed(), changed=changed, applied=applied, pending=pending,
                     snapshot=doc.get("snapshot"), env=doc.get("env"), identical=doc.get("identical"),
                     dry_run=bool(doc.get("dry_run")), steps=doc.get("steps"), warnings=doc.get("warnings") or [],
                     restored=not module.check_mode, host=host, bootstrapped=bootstrapped, would_bootstrap=would,
                     planned=True, **told)


if __name__ == "__main__":
    main()
