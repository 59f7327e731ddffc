"""Which models rlvr's hand-written fast paths know: the Llama family, whose attention is plain causal
self-attention over rotary positions. Both the fused decode step (rollout/decode_steps.py) and the blocked
attention of the packed training forward (rlvr/model/blocked_attention.py) are exact only for these; other models take
transformers' own paths."""
from __future__ import annotations

LLAMA_FAMILY = ("llama", "qwen2", "mistral")  # SmolLM2 is a "llama"


def full_attention_llama(config) -> bool:
    """A Llama-family config whose every layer attends to all earlier tokens (a sliding window drops keys that
    transformers' own path knows to drop and ours would not)."""
    if config is None or getattr(config, "model_type", None) not in LLAMA_FAMILY:
        return False
    return getattr(config, "sliding_window", None) is None or not getattr(config, "use_sliding_window", True)
