"""/v1/tasks: what can be verified: signatures, dtypes, public cases, tolerance policies, reward spec."""

from __future__ import annotations

from dataclasses import asdict

from fastapi import APIRouter

from api.problems import GATE_PROBLEMS, P_NOT_FOUND, P_VALIDATION, Problem, problem_responses
from api.schemas import CaseView, TaskView
from kernelproof_core.dtypes import parse_dtype
from kernelproof_core.presets import PRESETS
from kernelproof_core.reward import CURRENT_REWARD
from kernelproof_core.tasks import TASKS, CaseSet, Task

router = APIRouter(prefix="/v1/tasks", tags=["tasks"])


def task_view(task: Task) -> TaskView:
    info = task.info
    return TaskView(
        name=info.name,
        signature=info.signature,
        math=info.math,
        output=info.output,
        dtypes=list(info.dtypes),
        notes=info.notes,
        reward_spec=CURRENT_REWARD,
        tolerances={d: task.tolerance(parse_dtype(d)).as_dict() for d in info.dtypes},
        public_cases={
            cs.value: [
                CaseView(
                    case_id=c.case_id,
                    kind=c.kind.value,
                    dims=dict(c.dims),
                    description=c.description,
                    distribution=c.distribution,
                    row_stride_pad=c.row_stride_pad,
                )
                for c in task.cases(cs, 0)
            ]
            for cs in CaseSet
        },
        presets={
            name: {k: (sorted(v) if isinstance(v, frozenset) else v) for k, v in asdict(p).items()}
            for name, p in PRESETS.items()
        },
    )


@router.get(
    "",
    response_model=list[TaskView],
    summary="All verification tasks",
    responses=problem_responses(*GATE_PROBLEMS),
)
def list_tasks() -> list[TaskView]:
    return [task_view(t) for t in TASKS.values()]


@router.get(
    "/{name}",
    response_model=TaskView,
    summary="One verification task",
    responses=problem_responses(*GATE_PROBLEMS, P_NOT_FOUND, P_VALIDATION),
)
def get_task(name: str) -> TaskView:
    task = TASKS.get(name)
    if task is None:
        raise Problem(P_NOT_FOUND, f"no task {name!r}; known: {', '.join(TASKS)}")
    return task_view(task)
