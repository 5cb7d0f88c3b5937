# -*- coding: utf-8 -*-
# Copyright: tfgpu-install developers
# MIT License (see LICENSE)
from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The options every tfgpu module takes (module_utils/tfgpu.py COMMON_ARGS).
    DOCUMENTATION = r"""
options:
  wheel:
    type: path
    description: The tfgpu-install wheel on the node (bootstrapped into O(tool_venv) once per wheel).
  tool_venv:
    type: path
    default: ~/.local/share/tfgpu-install/tool
    description: The tool's own venv on the node.
  python:
    type: str
    default: python3
    description: The interpreter that makes the tool venv.
  index_url:
    type: str
    description: The package index for the tool's dependencies and the env's packages.
  find_links:
    type: path
    description: A wheel directory for the tool's bootstrap instead of an index.
  tool_env:
    type: dict
    default: {}
    aliases: [environment]
    description:
      - Environment for the tool (TFGPU_*, UV_*, PIP_*).
      - The alias C(environment) is kept for old plays; it is not the task keyword of that name.
  tool_timeout:
    type: int
    default: 1800
    aliases: [timeout]
    description:
      - Seconds before one tfgpu-install run on this node is killed (the per-host bound).
      - The alias C(timeout) is kept for old plays; it is not the task keyword of that name.
"""

    # The options of the modules that provision an env (tfgpu_install, tfgpu_restore).
    PROVISION = r"""
options:
  allow_cpu:
    type: bool
    default: false
    description: No usable GPU here is not an error (TF verified on the CPU).
  extra_args:
    type: list
    elements: str
    default: []
    description: More tfgpu-install flags (e.g. C(--assume-driver)).
  run_id:
    type: str
    description:
      - This run's id (C(tfgpu-install fleet) passes one). With it, the node keeps a ledger of what each run
        changed (C(.tfgpu-fleet-ledger.json) in O(tool_venv)), so a change whose result never reached the
        controller (a network partition, a killed controller) is reported by the next run (RV(unreported)).
  reported_run:
    type: str
    default: ""
    description:
      - The id of the last run whose result the controller received from this host (its RV(ledger_run)).
        A later change on the ledger is reported as RV(unreported) and C(changed).
"""
