"""Test helpers shared across test modules (real servers, real archives, real wheels)."""
