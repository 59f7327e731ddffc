"""Built-in environment tasks, each its prompts (with the hashed held-out split) and an
environment that checks its outcome, played through rlvr/agents/ (the episode machinery): calculator.py
(multi-step arithmetic word problems with a calculator tool), filesystem.py (reach a target tree on an in-memory
filesystem), code.py (run code in the bubblewrap sandbox, then answer), textarena_adapter.py (TextArena's games
for rlvr/tasks/textarena.py). Here because every task lives in rlvr/tasks/."""
