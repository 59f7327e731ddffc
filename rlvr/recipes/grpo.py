"""Moved: the GRPO loop lives in rlvr/grpo/ since the package layout by stage.

`rlvr.recipes.grpo.train` is kept as a re-export so scripts written against it keep working; new code imports
`rlvr.grpo.loop.train`. This module will go after a release with the note in docs/design.md ("Where things are")."""
from rlvr.grpo.loop import train

__all__ = ["train"]
