"""Agents that act: multi-turn episodes with tool calls, environments with verifiable outcomes.

protocol.py    the Environment / Episode protocol and its records (torch-free)
tool_calls.py  strict parsing of tool calls from a model turn; running them with a time limit
episodes.py    the driver: token-in, token-out episodes on an engine's `continue_tokens`, as a RolloutBatch
envs/          built-in environments (calculator, filesystem, code) with their tasks
"""
