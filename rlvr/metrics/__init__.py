"""What a run reports: the metrics logger, its sinks (jsonl, TensorBoard, W&B), the progress line and the
diagnostic notes read from the metrics."""
