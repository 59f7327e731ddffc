"""Placeholder until the pipeline command lands (issue #10)."""


def register(sub) -> None:
    del sub
