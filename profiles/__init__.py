"""Knowledge data: YAML files read by installer.knowledge.model (this file makes them package data)."""
