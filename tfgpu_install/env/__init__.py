"""The environment's own room: where things are inside an env (layout), which envs this tool made
(registry), their state dirs and journals, their size on disk, the file-level integrity check, the
fingerprint, and the tools that act on an env (TargetEnv, uv/conda discovery, the tool env). Steps,
snapshot, engine and doctor use it; it uses none of them."""
