"""`tfgpu-install doctor`: diagnose this machine bottom-up, or classify a pasted log.

Exit codes:
  machine walk      0 every layer checked is fine (warnings may be listed)
                    13 (DIAGNOSED) a layer is broken: what, why and the fix are printed
                    3 (NO_GPU) no NVIDIA GPU and no driver here: nothing GPU-related to diagnose
  --log FILE|-      13 (DIAGNOSED) a known cause was found in the text
                    14 (UNEXPLAINED) the text ends in a failure (an exception, a fatal line, a crash) that no
                      rule explains: status "unknown", the line is named, never "nothing wrong"
                    0 no failure in the text: only known-harmless lines, or nothing known and nothing fatal
                      (then the layer-by-layer checks are printed; never a guess)
JSON (--log): `checklist` is the one list of generic checks (label + steps, null when a cause was found);
`advice` repeats its steps for readers of older versions and will not grow.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from tfgpu_install.commands.common import non_empty
from tfgpu_install.context import Context
from tfgpu_install.env.layout import user_path
from tfgpu_install.errors import ExitCode, UsageError
from tfgpu_install.guard import shellquote
from tfgpu_install.report import Block, Bullets, Heading, Result, Text, table

if TYPE_CHECKING:
    from tfgpu_install.doctor.gpuknowledge import KernelRows
    from tfgpu_install.doctor.rules import RuleSet

_EPILOG = """exit codes: 0 healthy (or, with --log, nothing wrong / no known cause and nothing fatal);
13 a broken layer (or, with --log, a known cause) was found; 14 (--log) the text ends in a failure no rule
explains; 3 no NVIDIA GPU or driver here."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = _EPILOG
    p.add_argument("--env", metavar="PATH", type=non_empty,
                   help="the environment to check (default: the active venv/conda env, if any)")
    p.add_argument("--log", metavar="FILE", type=non_empty,
                   help="classify a saved TensorFlow / pip / nvidia-smi / loader output ('-' for stdin) instead "
                        "of walking this machine")
    # another errors.yaml (tests, drafts)
    p.add_argument("--rules", metavar="FILE", type=non_empty, help=argparse.SUPPRESS)


def _read_log(name: str) -> str:
    from tfgpu_install.guard.bounded import read_text

    try:
        return read_text(name, "log", errors="replace")  # capped ('-': stdin): an endless input is BAD_INPUT
    except OSError as exc:
        raise UsageError(f"cannot read log file {name}: {exc.strerror}",
                         hint="give a readable file, or '-' for stdin") from exc


def run(args: argparse.Namespace, ctx: Context) -> Result:
    from tfgpu_install.doctor.rules import load_rules
    from tfgpu_install.knowledge.load import knowledge_dir

    rules = load_rules(Path(args.rules) if getattr(args, "rules", None) else None, profiles=knowledge_dir(ctx))
    kernels = _kernel_rows(ctx)
    if getattr(args, "log", None):
        return _log_result(_read_log(args.log), rules, kernels)
    from tfgpu_install.env.registry import default_env

    if getattr(args, "env", None) and not user_path(args.env).exists():
        from tfgpu_install.app.envs import no_env_error

        raise no_env_error(user_path(args.env))  # the one "no such env" answer (exit 6), as verify's
    last = default_env(ctx)
    env = (getattr(args, "env", None) or ctx.env("VIRTUAL_ENV") or ctx.env("CONDA_PREFIX")
           or (str(last) if last is not None else None))
    return _walk_result(ctx, rules, env, kernels)


def _kernel_rows(ctx: Context) -> "KernelRows":
    """profiles/kernels.yaml's floors and known failures (a site's knowledge dir first), as the resolver reads them."""
    from tfgpu_install.doctor.gpuknowledge import KernelRows
    from tfgpu_install.knowledge.load import knowledge_dir, load_kernels

    return KernelRows(*load_kernels(knowledge_dir(ctx)))


# ------------------------------------------------------------------ --log


def _log_result(text: str, rules: "RuleSet", kernels: Optional["KernelRows"] = None) -> Result:
    from tfgpu_install.doctor.classify import CAUSE, HARMLESS_ONLY, classify

    diag = classify(text, rules, kernels)
    blocks: list[Block] = [Heading("Log diagnosis")]
    if diag.status == CAUSE and diag.primary is not None:
        f = diag.primary
        blocks += [
            Text(f"Cause ({_layer_title(rules, f.layer)}): {f.cause}", "error"),
            Text(f"Fix: {f.fix}", "warn"),
            Bullets("Evidence", f.evidence),
            Text(f"Source: {f.source}  [rule {f.rule_id}]" + (f" [{f.knowledge}]" if f.knowledge else ""), "dim"),
        ]
    elif diag.status == HARMLESS_ONLY:
        blocks.append(Text("Nothing wrong in this log: the lines below are known noise, not a failure. "
                           "If something still fails, its cause is not in this text.", "ok"))
    elif diag.stopped_by:
        blocks.append(Text("Diagnosis: unknown. The program failed here. No known cause in this log explains it "
                           "(doctor does not guess).", "error"))
    else:
        blocks.append(Text("Diagnosis: unknown. No known cause in this log (doctor does not guess).", "warn"))
    if diag.stopped_by and diag.status != CAUSE:
        blocks.append(Text(f"What stopped the program: {diag.stopped_by}", "dim"))
    if diag.unexplained:
        blocks.append(Bullets("Lines doctor could not explain", diag.unexplained))
    if diag.advice:
        blocks.append(Bullets("Generic checklist (not a diagnosis: the layers to check, bottom-up)",
                              diag.advice, "dim"))
    others = [f for f in diag.others if f.severity != "info"]
    context = [f for f in diag.others if f.severity == "info"]
    if others:
        blocks.append(Bullets("Also found (symptoms or secondary)", tuple(f"[{f.rule_id}] {f.cause}" for f in others)))
    if context:
        blocks.append(Bullets("Context", tuple(f.cause for f in context), "dim"))
    if diag.harmless:
        blocks.append(Bullets("Known harmless (not the cause)",
                              tuple(f"[{f.rule_id}] {f.cause}" for f in diag.harmless), "dim"))
    smi_info = _smi_context(text)
    if smi_info:
        blocks.append(Text(smi_info["text"], "dim"))
    code = ExitCode.DIAGNOSED if diag.status == CAUSE else ExitCode.UNEXPLAINED if diag.stopped_by else ExitCode.OK
    data = {"mode": "log", **diag.to_json(), "nvidia_smi": smi_info.get("reading") if smi_info else None}
    return Result(data=data, blocks=blocks, exit_code=int(code))


def _smi_context(text: str) -> dict[str, Any]:
    """A pasted nvidia-smi table says the driver answered: worth stating next to a loader error."""
    from tfgpu_install.facts.gpu import OK, parse_nvidia_smi

    r = parse_nvidia_smi(text)
    if r.state != OK or not r.driver_version:
        return {}
    cuda = f", supports CUDA <= {r.cuda_version}" if r.cuda_version else ""
    return {
        "text": f"nvidia-smi in this text: driver {r.driver_version}{cuda}: the driver itself answered.",
        "reading": {"driver_version": r.driver_version, "cuda_version": r.cuda_version,
                    "gpus": [g.name for g in r.gpus]},
    }


def _layer_title(rules: "RuleSet", layer_id: str) -> str:
    for layer in rules.layers:
        if layer.id == layer_id:
            return layer.title
    return layer_id


# ------------------------------------------------------------------ machine walk


def _walk_result(ctx: Context, rules: "RuleSet", env: Optional[str],
                 kernels: Optional["KernelRows"] = None) -> Result:
    from tfgpu_install.doctor.chain import ABSENT, WARN, walk

    report = walk(ctx, rules, env, kernels)
    again = shellquote.command(ctx, "tfgpu-install", "verify", "--env", env or "ENV")  # a command to paste
    blocks: list[Block] = [Heading("tfgpu-install doctor: bottom-up")]
    blocks.append(table("", ("layer", "check", "status", "seen"),
                        [(_layer_title(rules, c.layer), c.name, c.status, c.summary) for c in report.checks]))
    if report.layers:
        blocks.append(table(f"The layers of `{again}`", ("#", "layer", "status", "seen"),
                            [(str(v.number), v.name, v.status, v.summary + (f" [{v.why}]" if v.why else ""))
                             for v in report.layers]))
    unchecked = [v.name for v in report.layers if v.status == "not checked"]
    if report.no_gpu:
        absent = next(c for c in report.checks if c.status == ABSENT)
        status, code = "no-gpu", ExitCode.NO_GPU
        blocks.append(Text(f"No NVIDIA GPU or driver found: {absent.summary}", "warn"))
        if report.layers:  # the env was examined, in part: say which part, never "nothing is broken"
            passed = [v.name for v in report.layers if v.status == "ok"]
            blocks.append(Text(f"The env's own layers found no cause ({', '.join(passed) or 'none'} ok); not checked "
                               f"here: {', '.join(unchecked)}. That is not a clean bill: run `{again}` on a machine "
                               "with the GPU.", "warn"))
        else:
            blocks.append(Text(f"What it means: {absent.cause}"))
        blocks.append(Text(f"What to do: {absent.fix}"))
    elif report.broken is not None:
        b = report.broken
        status, code = "broken", ExitCode.DIAGNOSED
        blocks += [Text(f"Broken: {_layer_title(rules, b.layer)} ({b.name}): {b.summary}", "error"),
                   Text(f"Why: {b.cause}"), Text(f"Fix: {b.fix}", "warn")]
        if b.evidence:
            blocks.append(Bullets("Evidence", b.evidence))
        blocks.append(Text("Layers above this one were not checked: fix this first, then run doctor again.", "dim"))
    else:
        status, code = "healthy", ExitCode.OK
        if unchecked:
            blocks.append(Text(f"Not checked by doctor: {', '.join(unchecked)} (their GPU calls are "
                               f"`{again}`'s).", "warn"))
        blocks.append(Text("Every layer checked is fine. If training is slow with low GPU-Util, the input pipeline is "
                           "the usual bottleneck: tf.data .cache() and .prefetch(tf.data.AUTOTUNE).", "ok"))
    warnings = [c for c in report.checks if c.status == WARN]
    if warnings:
        blocks.append(Bullets("Warnings met on the way",
                              tuple(f"{c.summary}: {c.cause} Fix: {c.fix}" for c in warnings), "warn"))
    data = {
        "mode": "machine", "status": status, "env": env, "wsl": report.wsl, "container": report.container,
        "broken": report.broken.to_json() if report.broken else None,
        "checks": [c.to_json() for c in report.checks],
        "warnings": [c.to_json() for c in warnings],
        "layers": [v.to_json() for v in report.layers],  # verify's layers, by name: ok / failed / not checked
    }
    return Result(data=data, blocks=blocks, exit_code=int(code))

