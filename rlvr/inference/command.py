"""Placeholder until the inference command lands (issue #10)."""


def register(sub) -> None:
    del sub
