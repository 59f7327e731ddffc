"""Supervised fine-tuning (`rlvr sft`): data.py (rows and bad rows), masking.py (assistant-token
masks), batching.py (order and micro-batches), step.py (one optimizer step), trainer.py (`sft`), command.py (CLI)."""
