"""Placeholder until the sft command lands (issue #10)."""


def register(sub) -> None:
    del sub
