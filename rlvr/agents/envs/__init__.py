"""Built-in environments (issue 26, item 5), each with its task (prompts with a hashed held-out split) and a verifier
of its outcome: calculator.py (multi-step arithmetic word problems with a calculator tool), filesystem.py (reach a
target tree on an in-memory filesystem), code.py (run code in the bubblewrap sandbox, then answer)."""
