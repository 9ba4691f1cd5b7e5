"""Rewards of different specs are never ranked together: `v_submission_dtype_scores` carries the reward spec of its
case rewards and `v_best_per_task_dtype` ranks per spec. Harness 0.4 moved from kernelproof.reward.v1
(launch-inclusive medians) to v2 (device time with launches hidden); the two are not comparable for launch-bound
kernels. Downgrade restores the views of 0002.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SCORES = """
SELECT c.submission_id, s.task, c.dtype,
       COALESCE(s.worker_gpu_class, s.gpu_class) AS gpu_class,
       s.source_sha256, s.generator, s.model, s.finished_at,
       COUNT(*) AS cases_total,
       SUM(CASE WHEN c.verdict = 'pass' THEN 1 ELSE 0 END) AS cases_passed,
       COUNT(r.value) AS cases_rewarded,
       CASE WHEN COUNT(r.value) = COUNT(*) THEN AVG(r.value) END AS mean_reward{spec_column}
FROM case_results c
JOIN submissions s ON s.id = c.submission_id
LEFT JOIN rewards r ON r.case_result_id = c.id
GROUP BY c.submission_id, s.task, c.dtype, COALESCE(s.worker_gpu_class, s.gpu_class),
         s.source_sha256, s.generator, s.model, s.finished_at"""

_BEST = """
SELECT task, dtype, gpu_class, submission_id, source_sha256, generator, model,
       mean_reward AS best_reward, finished_at{spec_column}
FROM (
    SELECT v.*, ROW_NUMBER() OVER (
        PARTITION BY v.task, v.dtype, v.gpu_class{spec_partition}
        ORDER BY v.mean_reward DESC, v.finished_at ASC) AS position_in_group
    FROM v_submission_dtype_scores v
    WHERE v.cases_passed = v.cases_total AND v.mean_reward IS NOT NULL
) ranked
WHERE position_in_group = 1"""


def _recreate(with_spec: bool) -> None:
    op.execute("DROP VIEW IF EXISTS v_best_per_task_dtype")
    op.execute("DROP VIEW IF EXISTS v_submission_dtype_scores")
    # A submission's case rewards share one spec (a run computes all of them with the same one).
    scores = _SCORES.format(spec_column=",\n       MAX(r.spec) AS reward_spec" if with_spec else "")
    best = _BEST.format(spec_column=", reward_spec" if with_spec else "",
                        spec_partition=", v.reward_spec" if with_spec else "")
    op.execute(f"CREATE VIEW v_submission_dtype_scores AS {scores.strip()}")
    op.execute(f"CREATE VIEW v_best_per_task_dtype AS {best.strip()}")


def upgrade() -> None:
    _recreate(with_spec=True)


def downgrade() -> None:
    _recreate(with_spec=False)
