#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: tfgpu-install developers
# MIT License (see LICENSE)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: tfgpu_snapshot
short_description: Export this host's known-good environment as a snapshot (tfgpu-install snapshot export)
version_added: 0.1.0
author: tfgpu-install developers (@tfgpu-install)
description:
  - Writes the snapshot to O(dest) on the node; fetch it to the controller with C(ansible.builtin.fetch)
    (the C(tfgpu.install.tfgpu) role does, with C(tfgpu_mode=snapshot)).
  - The export goes to Ansible's temp dir first; O(dest) is replaced only when the env it describes
    differs from what O(dest) holds (the snapshot's own id and creation time do not count), so
    C(changed) is true only on a change and an unchanged env keeps its snapshot id.
  - Check mode writes nothing on the node (it exports into Ansible's temp dir to compare, when the tool is there).
options:
  dest:
    type: path
    required: true
    description: Where the snapshot file goes on the node.
  env:
    type: path
    description: The env to export (default is the last one installed).
  format:
    type: str
    default: tfgpu
    choices: [tfgpu, requirements, conda, pylock]
    description: The snapshot format (V(tfgpu) is restorable; the others are for pip, conda, PEP 751).
extends_documentation_fragment:
  - tfgpu.install.common
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Nothing is written outside Ansible's temp dir.
  diff_mode:
    support: full
    details: The snapshot file before and after (id and creation time left out).
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Export the env that passed verification
  tfgpu.install.tfgpu_snapshot:
    dest: /tmp/known-good.tfgpu.yaml
  register: snap

- name: Bring it to the controller
  ansible.builtin.fetch:
    src: "{{ snap.path }}"
    dest: "snapshots/{{ inventory_hostname }}.tfgpu.yaml"
    flat: true
"""

RETURN = r"""
path:
  description: The snapshot file on the node.
  returned: success
  type: str
id:
  description: The snapshot's id (the one O(dest) holds).
  returned: success
  type: str
packages:
  description: How many packages the snapshot lists.
  returned: when the tool reports it
  type: int
planned:
  description: False when check mode had no tool on the node to export with.
  returned: always
  type: bool
host:
  description: machine_id, driver, gpus, gpu_details, glibc, cuda_driver of this host.
  returned: always
  type: dict
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
"""

import os
import re

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.tfgpu.install.plugins.module_utils.tfgpu import (
    COMMON_ARGS,
    bootstrap,
    elapsed,
    exit_without_tool,
    fail,
    host_facts,
    run_tool,
)

# Top-level keys that differ between two exports of the same env.
_VOLATILE = re.compile(r"^(id|created):")
_ID = re.compile(r"^id:\s*['\"]?([^'\"\s]+)")


def _read(path, limit=16 << 20):
    try:
        with open(path, "rb") as f:
            return f.read(limit).decode("utf-8", "replace")
    except (IOError, OSError):
        return None


def _content(text):
    """The snapshot without what changes on every export (its id and creation time)."""
    return "".join(line for line in (text or "").splitlines(True) if not _VOLATILE.match(line))


def _id(text, fallback):
    for line in (text or "").splitlines():
        m = _ID.match(line)
        if m:
            return m.group(1)
    return fallback


# Generated from tfgpu_install/snapshot/exports.FORMATS by scripts/collection_choices.py (as is the
# `choices:` of DOCUMENTATION); a test compares them.
FORMATS = ["tfgpu", "requirements", "conda", "pylock"]


def main():
    spec = dict(COMMON_ARGS)
    spec.update(
        dest=dict(type="path", required=True),
        env=dict(type="path", required=False),
        format=dict(type="str", default="tfgpu", choices=FORMATS),
    )
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    p = module.params
    tool = bootstrap(module)[0]
    host = host_facts(module, tool)
    if tool is None:
        exit_without_tool(module, host, path=p["dest"])
    fresh = os.path.join(module.tmpdir, "export-" + os.path.basename(p["dest"]))
    args = ["snapshot", "export", "-o", fresh, "--format", p["format"]]
    if p.get("env"):
        args += ["--env", p["env"]]
    if p.get("index_url"):
        # The pins' hashes are looked up on the index the play names (the fleet's own), not wherever the
        # node's environment points (PyPI by default).
        args += ["--index-url", p["index_url"]]
    rc, doc, out, err = run_tool(module, tool, args)
    if rc != 0:
        fail(module, rc, doc, out, err, host=host)
    doc = doc or {}
    before, after = _read(p["dest"]), _read(fresh)
    changed = before is None or _content(before) != _content(after)
    if changed and not module.check_mode:
        module.atomic_move(fresh, p["dest"])
        module.set_mode_if_different(p["dest"], "0600", False)
    kept = after if changed else before
    result = dict(seconds=elapsed(), changed=changed, path=p["dest"], id=_id(kept, doc.get("id")),
                  packages=doc.get("packages"), host=host, planned=True)
    if module._diff:
        result["diff"] = {"before": _content(before), "after": _content(after),
                          "before_header": p["dest"], "after_header": p["dest"] + " (exported)"}
    module.exit_json(**result)


if __name__ == "__main__":
    main()
