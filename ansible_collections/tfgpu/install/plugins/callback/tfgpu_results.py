# -*- coding: utf-8 -*-
# Copyright: tfgpu-install developers
# MIT License (see LICENSE)
from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: tfgpu_results
type: notification
short_description: One result file per host on the controller, written as each host finishes
version_added: 0.2.0
author: tfgpu-install developers (@tfgpu-install)
description:
  - Writes C(<results_dir>/<host>.json) the moment a host's tfgpu module returns, or the moment the
    host fails on another task or cannot be reached (with Ansible's own message), so a run that is killed
    or times out keeps every finished host's row, and a reader can show rows as hosts finish.
  - The directory is the play's extra variable C(tfgpu_results_dir) (what C(tfgpu-install fleet) passes), or
    this plugin's O(results_dir).
  - Each file is C({"host", "mode", "check_mode", "result"}), written atomically, mode 0600.
requirements:
  - enable it in the callbacks_enabled setting (C(tfgpu-install fleet) does).
options:
  results_dir:
    description: Where the per-host files go (the extra variable C(tfgpu_results_dir) takes precedence).
    type: path
    env:
      - name: TFGPU_RESULTS_DIR
    ini:
      - section: callback_tfgpu_results
        key: results_dir
"""

import json
import os

from ansible import context
from ansible.plugins.callback import CallbackBase

_MODULES = ("tfgpu_install", "tfgpu_restore", "tfgpu_snapshot")


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "notification"
    CALLBACK_NAME = "tfgpu.install.tfgpu_results"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._dir = None
        self._mode = "install"
        self._rows = {}  # host -> the result last written

    def set_options(self, task_keys=None, var_options=None, direct=None):
        super(CallbackModule, self).set_options(task_keys=task_keys, var_options=var_options, direct=direct)
        self._dir = self.get_option("results_dir")

    def v2_playbook_on_play_start(self, play):
        extra = play.get_variable_manager().extra_vars if play.get_variable_manager() else {}
        self._dir = extra.get("tfgpu_results_dir") or self._dir
        self._mode = str(extra.get("tfgpu_mode") or "install")

    def _write(self, host, result):
        if not self._dir:
            return
        self._rows[host] = result
        doc = {"host": host, "mode": self._mode, "check_mode": bool(context.CLIARGS.get("check")),
               "result": result}
        os.makedirs(self._dir, mode=0o700, exist_ok=True)
        path = os.path.join(self._dir, host + ".json")
        tmp = "%s.tmp%d" % (path, os.getpid())
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(doc, f, default=str)
        os.replace(tmp, path)

    @staticmethod
    def _ours(result):
        return result._task.action.split(".")[-1] in _MODULES

    @staticmethod
    def _clean(result, failed):
        # Not the invocation: its tool_env may hold credentials (an index URL with a token).
        row = {k: v for k, v in result._result.items() if not k.startswith("_ansible") and k != "invocation"}
        row["failed"] = failed
        return row

    def v2_runner_on_ok(self, result):
        if self._ours(result):
            self._write(result._host.get_name(), self._clean(result, False))

    def v2_runner_on_failed(self, result, ignore_errors=False):
        host = result._host.get_name()
        if self._ours(result):
            self._write(host, self._clean(result, True))
            return
        if ignore_errors:
            return
        before = self._rows.get(host)
        if before is not None and before.get("failed"):
            return  # the role's closing `fail` repeats the module's failure: its row says it already
        row = dict(before or {})
        msg = result._result.get("msg") or result._result.get("stderr") or result._result.get("module_stderr")
        row.update(failed=True, changed=False, error="ansible-task", task=result._task.get_name(),
                   msg="%s: %s" % (result._task.get_name(), msg or "failed (no message)"))
        self._write(host, row)

    def v2_runner_on_unreachable(self, result):
        host = result._host.get_name()
        row = dict(self._rows.get(host) or {})
        row.update(failed=True, unreachable=True, changed=False, task=result._task.get_name(),
                   msg=result._result.get("msg") or "unreachable (no message)")
        self._write(host, row)
