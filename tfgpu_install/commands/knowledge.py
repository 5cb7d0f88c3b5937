"""`tfgpu-install knowledge update|show`: learn TensorFlow releases the tables lack from the package
index, and list what the knowledge holds and where each part came from.

Exit codes: 0 done (or offline: nothing asked, nothing changed); 8 (DOWNLOAD) the index could not be
reached, or the run's deadline (--timeout) passed (what was learned before is kept); 5 (BAD_INPUT) the
index's answer or the learned overlay is malformed, hostile or not this user's (the message says which and the fix).
"""

from __future__ import annotations

import argparse

from tfgpu_install.context import Context
from tfgpu_install.errors import ExitCode
from tfgpu_install.guard import argtypes
from tfgpu_install.report import Block, Bullets, Heading, Result, Text, table

DEFAULT_TIMEOUT = 300.0  # seconds for the whole update (issue #39 item 15); app.knowledge's default too


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="knowledge_command", metavar="ACTION", parser_class=type(p))
    sub.required = True
    up = sub.add_parser("update", help="learn TensorFlow releases newer than the tables from the package index")
    up.add_argument("--index-url", metavar="URL",
                    help="the index (PEP 691 JSON; default: UV_INDEX_URL/PIP_INDEX_URL or PyPI)")
    up.add_argument("--offline", action="store_true", help="ask no index; report what is kept")
    up.add_argument("--timeout", metavar="SECONDS", type=argtypes.seconds(1, 86400), default=DEFAULT_TIMEOUT,
                    help=f"stop the whole update after this long (default {DEFAULT_TIMEOUT:g}); what was learned "
                    "by then is kept")
    up.add_argument("--pre", action="store_true",
                    help="also learn pre-releases (2.22.0rc0); only the preview profile picks them")
    sh = sub.add_parser("show", help="the releases known, and which were learned (from where, when)")
    for sp in (up, sh):
        sp.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
        sp.add_argument("--debug", action="store_true", help=argparse.SUPPRESS)


def run(args: argparse.Namespace, ctx: Context) -> Result:
    from tfgpu_install.knowledge.load import knowledge_dir, load_knowledge

    curated = load_knowledge(knowledge_dir(ctx), cache_dir=ctx.cache_dir)
    if args.knowledge_command == "update":
        return _update(args, ctx, curated)
    return _show(ctx, curated)


def _update(args: argparse.Namespace, ctx: Context, curated: object) -> Result:
    from tfgpu_install.app.knowledge import update
    from tfgpu_install.knowledge.model import Knowledge

    assert isinstance(curated, Knowledge)
    rep = update(ctx, curated, getattr(args, "index_url", None), bool(getattr(args, "offline", False)),
                 pre=bool(getattr(args, "pre", False)), timeout=float(getattr(args, "timeout", DEFAULT_TIMEOUT)))
    blocks: list[Block] = [Heading("Knowledge update")]
    if rep.learned:
        blocks.append(table("Learned (not curated) from " + rep.index_url, ("tensorflow", "released", "source"),
                            [(r["tensorflow"], r["released"], r["source"]) for r in rep.learned]))
    elif rep.status == "up-to-date":
        blocks.append(Text(f"Nothing new: {rep.index_url} has no TensorFlow release newer than the tables.", "ok"))
    if rep.message:
        blocks.append(Text(rep.message, "warn" if rep.status in ("unreachable", "offline", "timed-out") else "dim"))
    if rep.skipped:
        blocks.append(Bullets("Not learned", tuple(rep.skipped), "warn"))
    blocks.append(Text(f"Learned releases are kept in {rep.overlay}; profiles decide whether they may be chosen "
                       "(latest: yes; stable: a patch release past its age rule, counted from when this tool "
                       "first saw it; preview: pre-releases too).", "dim"))
    code = ExitCode.DOWNLOAD if rep.status in ("unreachable", "timed-out") else ExitCode.OK
    data = {"status": rep.status, "index_url": rep.index_url, "learned": rep.learned, "skipped": rep.skipped,
            "kept": rep.kept, "overlay": rep.overlay, "message": rep.message or None}
    return Result(data=data, blocks=blocks, exit_code=int(code))


def _show(ctx: Context, curated: object) -> Result:
    from tfgpu_install.knowledge.learned import overlay_path, read_overlay
    from tfgpu_install.knowledge.model import Knowledge

    assert isinstance(curated, Knowledge)
    path = overlay_path(ctx.state_dir)
    learned = read_overlay(path)
    have = {r.tensorflow for r in curated.releases}
    rows = [{"tensorflow": r.tensorflow, "origin": "curated", "released": r.released, "source": r.source}
            for r in curated.releases[:5]]
    rows = [{"tensorflow": r.tensorflow, "origin": ("learned, not curated" + (" (pre-release)" if r.prerelease else ""))
             if r.tensorflow not in have else "learned, shadowed by a curated row", "released": r.released,
             "first_seen": r.first_seen, "source": r.source, "notes": r.notes} for r in learned] + rows
    matrix = curated.directory / "matrix.yaml" if curated.directory else "matrix.yaml"
    blocks: list[Block] = [
        Heading("Knowledge"),
        Text(f"curated: {len(curated.releases)} releases in {matrix}"),
        Text(f"learned: {len(learned)} releases in {path}" if learned else f"learned: none ({path})", "dim"),
        table("", ("tensorflow", "origin", "released", "source"),
              [(r["tensorflow"], r["origin"], str(r["released"] or ""), str(r["source"])) for r in rows]),
    ]
    data = {"curated": len(curated.releases), "learned": [r for r in rows if r["origin"] != "curated"],
            "newest_curated": [r for r in rows if r["origin"] == "curated"], "overlay": str(path)}
    return Result(data=data, blocks=blocks, exit_code=0)
