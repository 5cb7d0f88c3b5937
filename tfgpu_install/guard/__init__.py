"""What hostile input meets first: strict names and versions (names), the env-path policy
(envpath), per-shell quoting (shellquote), the trust rule for kept files (trust), bounded reads
(bounded) and parse-time argument types (argtypes)."""
