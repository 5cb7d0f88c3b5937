"""One module per command: `add_arguments(parser)` and `run(args, ctx) -> Result`.

Modules import their heavy dependencies inside `run`, so `probe`/`plan` start fast.
"""

# name -> (module, one-line help). Order is the order of `--help`.
COMMANDS: dict[str, tuple[str, str]] = {
    "install": ("install", "probe, resolve, provision, verify and snapshot a TensorFlow GPU env (default)"),
    "probe": ("probe", "what this machine has, each value with its source"),
    "plan": ("plan", "the TensorFlow/CUDA/cuDNN/Python combination this machine can run, and why"),
    "profiles": ("profiles", "list the profiles"),
    "rollback": ("rollback", "undo the last install, or return to a snapshot"),
    "status": ("status", "steps done and pending, last verification"),
    "verify": ("verify", "layered GPU check ending in a real matmul"),
    "doctor": ("doctor", "diagnose a broken setup, or classify a pasted log"),
    "snapshot": ("snapshot", "export, restore, list, show, diff and bundle snapshots"),
    "check": ("check", "drift between the live env and its last known-good snapshot"),
    "knowledge": ("knowledge", "learn new TensorFlow releases from the package index; show what is known"),
    "fleet": ("fleet", "many hosts through ansible-playbook: install, status, snapshot, restore"),
    "add": ("add", "add your own requirements to an env, resolved with TensorFlow's pins, and verify again"),
    "kernel": ("kernel", "register an env as a Jupyter kernel that sees its CUDA libraries (install, remove)"),
    "completion": ("completion", "print a shell completion script: bash, zsh or fish"),
    "envs": ("envs", "the envs tfgpu-install made (TF/CUDA/cuDNN/Python, verified, drift, size); remove one"),
    "upgrade": ("upgrade", "the profile's current choice in a new env with your added packages; made the default"),
    "self": ("selfcmd", "uninstall tfgpu-install (its state, cache and data; its envs with --envs)"),
}
