"""Typed run configuration: sections, the run config and its loader, and the rules that decide derived values.
Imports no registry: task and verifier names are Literals checked against the registries by a test."""
