"""Kernels that several red-team candidates share (tests/redteam/catalog.py bundles one into a candidate)."""
