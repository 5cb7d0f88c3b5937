"""Where the fleet's index listens (#39): parsed strictly, wildcards only when asked, `auto` = the source
address this machine's own routes use to reach the hosts (asked of the kernel: a connected UDP socket)."""

from __future__ import annotations

import argparse
import socket

import pytest

from tfgpu_install.errors import UsageError
from tfgpu_install.fleet.inventory import addresses_of, groups_of
from tfgpu_install.fleet.serveaddr import ServeAt, bind_address, parse, route_source


@pytest.mark.parametrize("text, host, port", [
    ("10.0.0.1", "10.0.0.1", 0), ("10.0.0.1:8080", "10.0.0.1", 8080), ("[fd00::1]:443", "fd00::1", 443),
    ("fd00::1", "fd00::1", 0), ("auto", "auto", 0), ("auto:9000", "auto", 9000), (":0", "", 0),
    ("0.0.0.0:65535", "0.0.0.0", 65535),
])
def test_parse(text: str, host: str, port: int) -> None:
    assert parse(text) == ServeAt(host, port)


@pytest.mark.parametrize("text", ["10.0.0.1:99999", "10.0.0.1:x", "pypi.org", "[fd00::1", "10.0.0.1:", "a:b:c:d:z",
                                  "10.0.0.1:000000080"])
def test_parse_refuses(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse(text)


def test_wildcards_only_when_asked() -> None:
    for at in (ServeAt("0.0.0.0", 0), ServeAt("", 8080), ServeAt("::", 0)):
        with pytest.raises(UsageError):
            bind_address(at, False, {})
    assert bind_address(ServeAt("", 8080), True, {}) == "0.0.0.0"
    assert bind_address(ServeAt("10.0.0.1", 0), False, {}) == "10.0.0.1"  # the control


def _primary() -> str | None:
    """An address of this machine other than loopback (the default route's source), if any."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.123", 9))  # TEST-NET-1: nothing is sent
            addr = str(s.getsockname()[0])
    except OSError:
        return None
    return None if addr.startswith("127.") else addr


def test_auto_takes_the_address_the_routes_use() -> None:
    assert route_source({"a": "127.0.0.1", "b": "127.0.0.2"}) == "127.0.0.1"
    assert bind_address(ServeAt("auto", 0), False, {"a": "127.0.0.1"}) == "127.0.0.1"
    primary = _primary()
    if primary is None:
        pytest.skip("no route off this machine to compare with")
    with pytest.raises(UsageError) as err:
        route_source({"a": "127.0.0.1", "b": "192.0.2.123"})  # two hosts reached from two addresses
    assert "more than one address" in err.value.message and primary in err.value.message


def test_auto_with_an_unresolvable_host_says_so() -> None:
    with pytest.raises(UsageError) as err:
        route_source({"ghost": "no-such-host.invalid"})
    assert "ghost" in err.value.message


def test_inventory_groups_and_addresses() -> None:
    doc = {"_meta": {"hostvars": {"node1": {"ansible_host": "10.0.0.11"}, "node2": {"ansible_host": 7}}},
           "all": {"children": ["ungrouped", "gpu", "old"]}, "gpu": {"hosts": ["node1", "node3"]},
           "old": {"hosts": ["node2"]}, "ungrouped": {"hosts": ["lone"]}}
    hosts = ["node1", "node2", "node3", "lone"]
    assert groups_of(doc, hosts) == {"node1": "gpu", "node2": "old", "node3": "gpu", "lone": "ungrouped"}
    assert addresses_of(doc, hosts) == {"node1": "10.0.0.11", "node2": "node2", "node3": "node3", "lone": "lone"}
