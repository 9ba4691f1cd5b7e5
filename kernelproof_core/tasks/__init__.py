"""The task registry: every built-in verification task, by name."""

from __future__ import annotations

from kernelproof_core.errors import UsageError
from kernelproof_core.tasks.base import Case, CaseKind, CaseSet, HiddenProfile, OutputSpec, Task, TaskInfo
from kernelproof_core.tasks.rms_norm import RmsNorm
from kernelproof_core.tasks.softmax import Softmax
from kernelproof_core.tasks.swiglu import Swiglu

TASKS: dict[str, Task] = {t.name: t for t in (RmsNorm(), Swiglu(), Softmax())}


def get_task(name: str) -> Task:
    try:
        return TASKS[name]
    except KeyError:
        raise UsageError(f"unknown task {name!r}; known tasks: {', '.join(TASKS)}") from None


def resolve_tasks(name: str) -> list[Task]:
    """`all` or one task name."""
    return list(TASKS.values()) if name == "all" else [get_task(name)]


__all__ = [
    "TASKS", "Case", "CaseKind", "CaseSet", "HiddenProfile", "OutputSpec", "Task", "TaskInfo", "get_task",
    "resolve_tasks",
]
