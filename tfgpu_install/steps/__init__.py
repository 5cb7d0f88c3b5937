"""Provisioning steps: each with a stable id, check / apply / undo."""
