"""Fleets: the same known-good env on many hosts, with ansible-playbook as the engine.

inventory.py (hosts from an inventory), playbook.py (ansible-playbook through the runner, per-host
result files), results.py (module results -> one row per host), same.py (one combination every host
can run), table.py (the live per-host table), run.py (the fleet commands' work)."""
