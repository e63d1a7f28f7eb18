"""Consistent reconfiguration of a running optical fabric: the plan (pure) and its execution."""

from controller.reconfigure.plan import (
    END_OF_TIME,
    FlipTimes,
    commit_rules,
    flip_times,
    prepare_rules,
)

__all__ = ["END_OF_TIME", "FlipTimes", "commit_rules", "flip_times", "prepare_rules"]
