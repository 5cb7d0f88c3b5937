"""The per-host table: its columns and rows (pure), and the live form that prints a row as each
host reports (plain text on a stream: ansible-playbook runs hosts in parallel, rows come in any order)."""

from __future__ import annotations

from typing import Optional, Sequence, TextIO

from tfgpu_install.fleet.results import HostResult
from tfgpu_install.guard.names import printable

COLUMNS = ("host", "GPUs", "driver", "TF", "CUDA", "cuDNN", "state", "verified", "seconds")
_WIDTHS = (14, 18, 12, 8, 6, 6, 12, 11, 7)


def verified_cell(r: HostResult) -> str:
    """What the verification that ran checked: "GPU", "CPU only" (--allow-cpu: TensorFlow ran on the CPU),
    "yes (GPU ?)" where the node's tool did not say which, "no", or "-" (nothing verified in this run)."""
    if r.verified is None:
        return "-"
    if not r.verified:
        return "no"
    if r.gpu_verified is None:
        return "yes (GPU ?)"
    return "GPU" if r.gpu_verified else "CPU only"


def row(r: HostResult) -> tuple[str, ...]:
    # "none" only for a host that reported: an unreachable one's GPUs are unknown.
    gpus = ", ".join(r.gpus) if r.gpus else ("none" if r.machine_id or r.driver else "-")
    seconds = "-" if r.seconds is None else f"{r.seconds:.1f}"
    return (r.name, gpus, r.driver or "-", r.tensorflow or "-", r.cuda or "-", r.cudnn or "-",
            r.state, verified_cell(r), seconds)


def rows(results: Sequence[HostResult]) -> list[tuple[str, ...]]:
    return [row(r) for r in results]


def _line(cells: Sequence[str]) -> str:
    # A node's strings reach this terminal: control characters (escape sequences) are written as \xNN.
    return "  ".join(printable(" ".join(c.split()))[:w].ljust(w) for c, w in zip(cells, _WIDTHS)).rstrip()


def summary(results: Sequence[HostResult]) -> dict[str, int]:
    counts = {"hosts": len(results), "ok": 0, "changed": 0, "failed": 0, "refused": 0, "unreachable": 0,
              "not_finished": 0}
    for r in results:
        counts["ok"] += int(r.ok)
        counts["changed"] += int(r.changed)
        key = r.state.replace(" ", "_") if r.state in ("failed", "refused", "unreachable", "not finished") else None
        if key:
            counts[key] += 1
        elif not r.ok:
            counts["failed"] += 1
    return counts


def summary_line(results: Sequence[HostResult]) -> str:
    c = summary(results)
    return (f"{c['hosts']} host(s): {c['ok']} ok ({c['changed']} changed), {c['failed']} failed, "
            f"{c['refused']} refused, {c['unreachable']} unreachable"
            + (f", {c['not_finished']} not finished" if c["not_finished"] else ""))


class LiveTable:
    """Prints the header once, then one row per host as its result arrives."""

    def __init__(self, stream: Optional[TextIO]) -> None:
        self.stream = stream
        self.shown: set[str] = set()

    def start(self, title: str) -> None:
        if self.stream is not None:
            self.stream.write(f"{title}\n{_line(COLUMNS)}\n")
            self.stream.flush()

    def add(self, result: HostResult) -> None:
        if result.name in self.shown:
            return
        self.shown.add(result.name)
        if self.stream is not None:
            self.stream.write(_line(row(result)) + "\n")
            self.stream.flush()
