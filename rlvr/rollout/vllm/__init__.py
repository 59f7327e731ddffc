"""The vLLM rollout engine: in-process engine, the OpenAI-compatible server transport, weight conversion and
weight sync."""
