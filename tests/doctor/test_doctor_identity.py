"""doctor and the probe ask one host-identity module (facts/identity.py): the same machine is the same
kind of machine to both (issue 30). Before, doctor knew containers only by /.dockerenv."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.doctor_layouts import make_ctx, plant, replay
from tests.support.promised import absent
from tfgpu_install.doctor.chain import walk
from tfgpu_install.doctor.rules import load_rules
from tfgpu_install.facts.host import gather_host

pytestmark = pytest.mark.skipif(absent("gcc"), reason="gcc builds the stub libraries")


def test_a_kubernetes_pod_is_a_container_to_doctor_and_to_the_probe(tmp_env: dict[str, str]) -> None:
    root = Path(tmp_env["TFGPU_ROOT"])
    plant(root, "/proc/1/cgroup", "0::/kubepods.slice/kubepods-besteffort.slice/cri-containerd-4f1c.scope\n")
    ctx = make_ctx(tmp_env, replay(None))
    host, _ = gather_host(ctx, runner_glibc=False)
    assert host.container == "kubernetes"
    rep = walk(ctx, load_rules())
    assert rep.container is True and "--gpus all" in rep.checks[0].fix
