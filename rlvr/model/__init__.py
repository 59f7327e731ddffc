"""The policy model: loading (embedded GGUF, local or Hub weights), LoRA, compute precision, and the training
forward that turns token ids into per-token log-probs (packing, blocked attention, fused head and layers)."""
