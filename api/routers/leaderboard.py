"""/v1/leaderboard: best passing candidates by reward, per task, dtype and GPU class."""

from __future__ import annotations

from fastapi import APIRouter, Query

from api.deps import SessionDep
from api.problems import GATE_PROBLEMS, P_VALIDATION, problem_responses
from api.schemas import Leaderboard, LeaderboardEntry
from api.views import submission_url
from kernelproof_core.reward import CURRENT_REWARD
from kernelproof_core.store import queries

router = APIRouter(prefix="/v1/leaderboard", tags=["leaderboard"])


@router.get(
    "",
    response_model=Leaderboard,
    summary="Best passing candidates by reward",
    responses=problem_responses(*GATE_PROBLEMS, P_VALIDATION),
)
def leaderboard(
    session: SessionDep,
    task: str | None = Query(None, max_length=64),
    dtype: str | None = Query(None, max_length=16),
    gpu_class: str | None = Query(None, max_length=32),
    limit: int = Query(20, ge=1, le=200),
    reward_spec: str = Query(CURRENT_REWARD, max_length=64, description="rank rewards of this spec only"),
) -> Leaderboard:
    """One entry per distinct source and dtype, highest mean case reward first, under one reward spec (rewards of
    different specs are not comparable); passing candidates without a speed reward (interpreter runs) follow every
    rewarded one."""
    rows = queries.leaderboard(session, task, dtype, gpu_class, limit, reward_spec)
    return Leaderboard(
        entries=[
            LeaderboardEntry(
                rank=i + 1,
                submission_id=r["submission_id"],
                url=submission_url(r["submission_id"]),
                task=r["task"],
                dtype=r["dtype"],
                gpu_class=r["gpu_class"],
                reward=r["mean_reward"],
                reward_spec=r["reward_spec"],
                cases_passed=r["cases_passed"],
                cases_total=r["cases_total"],
                generator=r["generator"],
                model=r["model"],
                source_sha256=r["source_sha256"],
                finished_at=r["finished_at"],
            )
            for i, r in enumerate(rows)
        ]
    )
