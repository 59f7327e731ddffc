"""Typed run configuration: sections, the run config and its loader, and the rules that decide derived values.
Imports no registry: the built-in tasks are listed once in task_catalog.py (rlvr.tasks makes its registry from it);
verifier names are a Literal checked against the registry by a test."""
