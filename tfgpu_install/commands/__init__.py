"""One module per command: `add_arguments(parser)` and `run(args, ctx) -> Result` (`args.argv`:
the command line as run, the default command named). A row's `early` module may answer before
any parser is built (`answer(argv, environ, as_json, debug) -> exit code or None`): install's
no-op fast path. cli.py dispatches through this table and knows no command by name.

Modules import their heavy dependencies inside `run`, so `probe`/`plan` start fast.
"""

from typing import NamedTuple


class Command(NamedTuple):
    """One row of the command table: what `--help`, the completion scripts, the docs' reference
    pages and the man page all say about a command (docs/reference is generated from it)."""

    module: str  # tfgpu_install.commands.<module>
    help: str  # the one line `tfgpu-install --help` lists and `COMMAND --help` starts with
    example: str  # one real command line, shown in `COMMAND --help`'s epilog
    actions: tuple[tuple[str, str], ...] = ()  # (ACTION, its example) for a command with actions of its own
    early: str = ""  # tfgpu_install.commands.<early>.answer() may answer before parsing (see above)


DEFAULT = "install"  # what `tfgpu-install --profile stable` (a flag first) runs

# Order is the order of `--help`.
COMMANDS: dict[str, Command] = {
    "install": Command("install", "probe, resolve, provision, verify and snapshot a TensorFlow GPU env (default)",
                       "tfgpu-install install --profile stable --allow-cpu -y", early="noop"),
    "probe": Command("probe", "what this machine has, each value with its source",
                     "tfgpu-install probe --json"),
    "plan": Command("plan", "the TensorFlow/CUDA/cuDNN/Python combination this machine can run, and why",
                    "tfgpu-install plan --tensorflow 2.15 --assume-driver 535.104.05 --assume-gpu A100"),
    "profiles": Command("profiles", "list the profiles",
                        "tfgpu-install profiles"),
    "rollback": Command("rollback", "undo the last install, or return to a snapshot",
                        "tfgpu-install rollback --env ~/envs/tf -y"),
    "status": Command("status", "steps done and pending, last verification",
                      "tfgpu-install status --env ~/envs/tf"),
    "verify": Command("verify", "layered GPU check ending in a real matmul",
                      "tfgpu-install verify --env ~/envs/tf --benchmark"),
    "gpu-check": Command("gpucheck", "the GPU check for a machine with no network: --pack DIR builds what it needs",
                         "tfgpu-install gpu-check --pack ./gpu-pack"),
    "doctor": Command("doctor", "diagnose a broken setup, or classify a pasted log",
                      "tfgpu-install doctor --log train.log"),
    "snapshot": Command("snapshot",
                        "export, restore, list, show, diff and bundle snapshots; build a container image from one",
                        "tfgpu-install snapshot export --env ~/envs/tf -o tf-env.yaml",
                        (("export", "tfgpu-install snapshot export --env ~/envs/tf -o tf-env.yaml"),
                         ("restore", "tfgpu-install snapshot restore tf-env.yaml --dry-run"),
                         ("list", "tfgpu-install snapshot list"),
                         ("show", "tfgpu-install snapshot show 20261201T000000Z-known-good-1a2b3c"),
                         ("diff", "tfgpu-install snapshot diff old.yaml new.yaml"),
                         ("bundle", "tfgpu-install snapshot bundle tf-env.yaml -o ./bundle"),
                         ("image", "tfgpu-install snapshot image tf-env.yaml -o ./image-context"))),
    "check": Command("check", "drift between the live env and its last known-good snapshot",
                     "tfgpu-install check --env ~/envs/tf --full"),
    "accept": Command("accept", "re-verify the env as it is now and, if it passes, make it the new known-good",
                      "tfgpu-install accept --env ~/envs/tf"),
    "knowledge": Command("knowledge", "learn new TensorFlow releases from the package index; show what is known",
                         "tfgpu-install knowledge update",
                         (("update", "tfgpu-install knowledge update --offline"),
                          ("show", "tfgpu-install knowledge show"))),
    "fleet": Command("fleet", "many hosts through ansible-playbook: install, status, snapshot, restore",
                     "tfgpu-install fleet install -i hosts.ini --same",
                     (("install", "tfgpu-install fleet install -i hosts.ini --same"),
                      ("status", "tfgpu-install fleet status -i hosts.ini"),
                      ("snapshot", "tfgpu-install fleet snapshot -i hosts.ini -o ./snapshots"),
                      ("restore", "tfgpu-install fleet restore -i hosts.ini tf-env.yaml --offline"))),
    "cluster": Command("cluster", "a verified env per node type of a Slurm cluster; Kubernetes Jobs from a snapshot",
                       "tfgpu-install cluster slurm --shared /shared/tfgpu --allow-cpu",
                       (("slurm", "tfgpu-install cluster slurm --shared /shared/tfgpu --allow-cpu --wait 600"),
                        ("kube", "tfgpu-install cluster kube tf-env.yaml --image registry.example/tf:2.17 -o k8s/"))),
    "add": Command("add", "add your own requirements to an env, resolved with TensorFlow's pins, and verify again",
                   "tfgpu-install add 'pandas>=2' scikit-learn --env ~/envs/tf"),
    "kernel": Command("kernel", "register an env as a Jupyter kernel that sees its CUDA libraries (install, remove)",
                      "tfgpu-install kernel install --env ~/envs/tf",
                      (("install", "tfgpu-install kernel install --env ~/envs/tf"),
                       ("remove", "tfgpu-install kernel remove --env ~/envs/tf"))),
    "completion": Command("completion", "print a shell completion script: bash, zsh or fish",
                          "tfgpu-install completion bash"),
    "envs": Command("envs", "the envs tfgpu-install made (TF/CUDA/cuDNN/Python, verified, drift, size); remove one",
                    "tfgpu-install envs --all",
                    (("list", "tfgpu-install envs list --all"),
                     ("remove", "tfgpu-install envs remove ~/envs/old --dry-run"),
                     ("default", "tfgpu-install envs default ~/envs/tf"))),
    "upgrade": Command("upgrade",
                       "the profile's current choice in a new env with your added packages; made the default",
                       "tfgpu-install upgrade -y"),
    "self": Command("selfcmd", "uninstall tfgpu-install (its state, cache and data; its envs with --envs)",
                    "tfgpu-install self uninstall --dry-run",
                    (("uninstall", "tfgpu-install self uninstall --dry-run"),)),
}
