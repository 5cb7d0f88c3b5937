"""Knowledge data: YAML files read by tfgpu_install.knowledge.model (this file makes them package data)."""
