#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: tfgpu-install developers
# MIT License (see LICENSE)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: tfgpu_facts
short_description: This host's GPUs, driver, glibc and TensorFlow env as ansible_facts.tfgpu
version_added: 0.2.0
author: tfgpu-install developers (@tfgpu-install)
description:
  - Runs C(tfgpu-install probe --json) and C(status --json) (both read-only) with the tool already on the
    node, and returns them as C(ansible_facts.tfgpu) for C(group_by) (for example on compute capability).
  - A node without the tool returns what Ansible can read itself (machine id) and C(ansible_facts.tfgpu.tool=false).
  - Writes nothing on the node.
options:
  env:
    type: path
    description: The env whose state is reported (default is the tool's default env).
extends_documentation_fragment:
  - tfgpu.install.common
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.facts
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  facts:
    support: full
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: GPU facts
  tfgpu.install.tfgpu_facts:

- name: One group per compute capability of the first GPU (e.g. tfgpu_cc_8_6)
  ansible.builtin.group_by:
    key: "tfgpu_cc_{{ (ansible_facts.tfgpu.gpus[0].compute_capability | default('none')) | replace('.', '_') }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts about this host's GPUs and TensorFlow env.
  returned: always
  type: complex
  contains:
    tfgpu:
      description:
        - tool (the tool is on the node), machine_id, driver, cuda_driver (the newest CUDA the driver runs),
          glibc, gpus (name, compute_capability, memory_mib), env, verified, tensorflow, cuda, cudnn
          (the last verified stack).
      returned: always
      type: dict
      sample:
        tool: true
        driver: "550.54.15"
        cuda_driver: "12.4"
        glibc: "2.35"
        gpus: [{name: "NVIDIA A100-SXM4-80GB", compute_capability: "8.0", memory_mib: 81920}]
        env: /home/user/.local/share/tfgpu-install/envs/tf-2.16
        verified: true
        tensorflow: "2.16.1"
        cuda: "12.3"
        cudnn: "8.9"
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.tfgpu.install.plugins.module_utils.tfgpu import COMMON_ARGS, host_facts, run_tool


def main():
    spec = dict(COMMON_ARGS)
    spec.update(env=dict(type="path", required=False))
    module = AnsibleModule(argument_spec=spec, supports_check_mode=True)
    p = module.params
    tool = os.path.join(os.path.expanduser(p["tool_venv"]), "bin", "tfgpu-install")
    tool = tool if os.path.exists(tool) else None
    host = host_facts(module, tool)
    facts = {"tool": tool is not None, "machine_id": host["machine_id"], "driver": host["driver"],
             "cuda_driver": host["cuda_driver"], "glibc": host["glibc"], "gpus": host["gpu_details"],
             "env": None, "verified": None, "tensorflow": None, "cuda": None, "cudnn": None}
    if tool:
        doc = run_tool(module, tool, ["status"] + (["--env", p["env"]] if p.get("env") else []))[1]
        if isinstance(doc, dict):
            verification = doc.get("verification") or {}
            facts["env"] = doc.get("env")
            facts["verified"] = bool(verification.get("ok")) if verification else False
            if verification.get("ok"):
                facts.update({k: verification.get(k) for k in ("tensorflow", "cuda", "cudnn")})
    module.exit_json(changed=False, ansible_facts={"tfgpu": facts})


if __name__ == "__main__":
    main()
