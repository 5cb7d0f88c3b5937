"""Where the fleet's index listens (`--serve-index ADDR[:PORT]`): parsed strictly (an IP address of this
machine, or `auto`; a port 0-65535, 0 = any free one), wildcards (0.0.0.0, ::, an empty address) refused
unless the user asks for every interface, and `auto` = the address this controller's routes use to reach
the nodes (the kernel's own choice: a UDP socket connected to each node's address; no packet is sent)."""

from __future__ import annotations

import argparse
import ipaddress
import socket
from dataclasses import dataclass
from typing import Mapping

from tfgpu_install.errors import UsageError

AUTO = "auto"
_WILDCARDS = ("", "0.0.0.0", "::", "*")


@dataclass(frozen=True)
class ServeAt:
    host: str  # an IP address, AUTO, or a wildcard (refused unless asked)
    port: int

    @property
    def wildcard(self) -> bool:
        return self.host in _WILDCARDS


def parse(text: str) -> ServeAt:
    """argparse type for --serve-index: ADDR, ADDR:PORT, [V6ADDR]:PORT, auto[:PORT], :PORT."""
    host, port = _split(text.strip())
    if port is not None and not (port.isdigit() and len(port) <= 5 and int(port) <= 65535):
        raise argparse.ArgumentTypeError(f"{text!r}: the port {port!r} is not a number from 0 to 65535")
    if host not in _WILDCARDS and host != AUTO:
        try:
            ipaddress.ip_address(host)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r}: {host!r} is not an IP address (give an address of this machine that the nodes "
                f"reach, or `{AUTO}` to take the one this machine's routes to them use)") from None
    return ServeAt(host, int(port) if port else 0)


def _split(text: str) -> tuple[str, "str | None"]:
    if text.startswith("["):
        inner, sep, rest = text[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise argparse.ArgumentTypeError(f"{text!r} is not [IPV6]:PORT")
        return inner, (rest[1:] if rest else None)
    if text.count(":") == 1:
        host, port = text.split(":")
        return host, port
    return text, None  # an IPv4 address, a bare IPv6 one, or `auto`


def bind_address(at: ServeAt, any_interface: bool, addresses: Mapping[str, str]) -> str:
    """The address to listen on, checked: a wildcard only with any_interface; `auto` resolved."""
    if at.wildcard and not any_interface:
        raise UsageError(
            f"--serve-index {at.host or '(empty)'}:{at.port} would listen on every interface of this machine",
            "give the address the nodes reach this controller on (or `auto`); --serve-index-any if every "
            "interface is what you want", ref="serve-index")
    if at.wildcard:
        return "::" if at.host == "::" else "0.0.0.0"
    return route_source(addresses) if at.host == AUTO else at.host


def route_source(addresses: Mapping[str, str]) -> str:
    """The one local address this machine's routes use to reach every host; a usage error when they differ
    or a host's address cannot be resolved (then ADDR must be given)."""
    sources: dict[str, list[str]] = {}
    for host, addr in addresses.items():
        try:
            family, _, _, _, sockaddr = socket.getaddrinfo(addr, 9, type=socket.SOCK_DGRAM)[0]
            with socket.socket(family, socket.SOCK_DGRAM) as s:
                s.connect(sockaddr)
                sources.setdefault(str(s.getsockname()[0]), []).append(host)
        except OSError as exc:
            raise UsageError(f"--serve-index auto: no route to {host} ({addr}): {exc.strerror or exc}",
                             "give --serve-index the address of this machine that the nodes reach",
                             ref="serve-index") from exc
    if len(sources) != 1:
        seen = "; ".join(f"{src} for {', '.join(hosts)}" for src, hosts in sources.items())
        raise UsageError(f"--serve-index auto: the hosts are reached from more than one address ({seen})",
                         "give --serve-index one address all of them reach", ref="serve-index")
    return next(iter(sources))
