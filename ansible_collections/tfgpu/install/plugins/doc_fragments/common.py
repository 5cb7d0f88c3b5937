# -*- coding: utf-8 -*-
from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The options every tfgpu module takes (module_utils/tfgpu.py COMMON_ARGS).
    DOCUMENTATION = r"""
options:
  wheel:
    type: path
    description: "the tfgpu-install wheel on the node (bootstrapped into I(tool_venv) once per wheel)"
  tool_venv:
    type: path
    default: ~/.local/share/tfgpu-install/tool
    description: "the tool's own venv on the node"
  python:
    type: str
    default: python3
    description: "the interpreter that makes the tool venv"
  index_url:
    type: str
    description: "package index for the tool's dependencies and the env's packages"
  find_links:
    type: path
    description: "a wheel directory for the tool's bootstrap instead of an index"
  environment:
    type: dict
    default: {}
    description: "environment for the tool (TFGPU_*, UV_*, PIP_*)"
  timeout:
    type: int
    default: 1800
    description: "seconds before a tfgpu-install run is killed"
"""

    # The options of the modules that provision an env (tfgpu_install, tfgpu_restore).
    PROVISION = r"""
options:
  allow_cpu:
    type: bool
    default: false
    description: "no usable GPU here is not an error (TF verified on the CPU)"
  extra_args:
    type: list
    elements: str
    default: []
    description: "more tfgpu-install flags (e.g. --assume-driver)"
"""
