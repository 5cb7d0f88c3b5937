#!/usr/bin/python
# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: tfgpu_snapshot
short_description: Export this host's known-good environment as a snapshot (tfgpu-install snapshot export)
description:
  - Writes the snapshot to I(dest) on the node; fetch it to the controller with C(ansible.builtin.fetch)
    (the C(tfgpu.install.node) role does, with C(tfgpu_mode=snapshot)).
  - C(changed) is true when I(dest) did not hold this snapshot before. Check mode writes nothing.
options:
  dest:
    type: path
    required: true
    description: "where the snapshot file goes on the node"
  env:
    type: path
    description: "the env to export (default: the last one installed)"
  format:
    type: str
    default: tfgpu
    choices: [tfgpu, requirements, conda, pylock]
    description: "the snapshot format (tfgpu: restorable; the others: for pip, conda, PEP 751)"
extends_documentation_fragment: [tfgpu.install.common]
"""

RETURN = r"""
path: {description: the snapshot file on the node, type: str}
id: {description: the snapshot's id, type: str}
"""

import hashlib
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.tfgpu.install.plugins.module_utils.tfgpu import (
    COMMON_ARGS,
    bootstrap,
    elapsed,
    fail,
    host_facts,
    run_tool,
)


def _digest(path):
    if not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def main():
    spec = dict(COMMON_ARGS)
    spec.update(
        dest=dict(type="path", required=True),
        env=dict(type="path", required=False),
        format=dict(type="str", default="tfgpu", choices=["tfgpu", "requirements", "conda", "pylock"]),
    )
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    p = module.params
    tool, _ = bootstrap(module)
    host = host_facts(module, tool)
    if module.check_mode:
        module.exit_json(seconds=elapsed(), changed=not os.path.exists(p["dest"]), path=p["dest"], host=host)
    before = _digest(p["dest"])
    args = ["snapshot", "export", "-o", p["dest"], "--format", p["format"]]
    if p.get("env"):
        args += ["--env", p["env"]]
    rc, doc, out, err = run_tool(module, tool, args)
    if rc != 0:
        fail(module, rc, doc, out, err, host=host)
    doc = doc or {}
    module.exit_json(seconds=elapsed(), changed=_digest(p["dest"]) != before, path=doc.get("path") or p["dest"],
                     id=doc.get("id"),
                     packages=doc.get("packages"), host=host)


if __name__ == "__main__":
    main()
