"""Placeholder until the sampling command lands (issue #10)."""


def register(sub) -> None:
    del sub
