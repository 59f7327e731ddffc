"""Pure math: advantages, policy objectives, loss aggregation and KL estimators, GAE, reward shaping, off-policy
correction. Tensors in, tensors out; nothing here imports the rest of rlvr (docs/design.md principle 2; an
import contract in .importlinter holds it)."""
