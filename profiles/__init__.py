"""Knowledge data: YAML files read by installer.knowledge (this file makes them package data)."""
