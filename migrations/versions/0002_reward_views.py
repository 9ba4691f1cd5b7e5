"""SQL views for the questions users ask of historical rewards (docs/OPERATIONS.md has ready-to-run queries).

Plain SQL that PostgreSQL and SQLite (>= 3.25, window functions) both accept; the only difference is how a
timestamp becomes a UTC calendar day. Views over views are dropped in reverse order.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FINAL = "('finished', 'error')"


def _day(column: str) -> str:
    """The UTC calendar day of a timestamp column. SQLite stores naive UTC text, Postgres timestamptz."""
    if op.get_bind().dialect.name == "postgresql":
        return f"CAST(({column} AT TIME ZONE 'UTC') AS DATE)"
    return f"DATE({column})"


def _views() -> list[tuple[str, str]]:
    return [
        # One row per submission with a final verdict: the base of most reward questions.
        (
            "v_submission_rewards",
            f"""
            SELECT s.id AS submission_id, s.task, s.generator, s.model, s.run_id, s.client_id,
                   COALESCE(s.worker_gpu_class, s.gpu_class) AS gpu_class, s.campaign_preset,
                   s.state, s.verdict, s.reward, s.source_sha256,
                   CASE WHEN s.reused_from IS NULL THEN 0 ELSE 1 END AS reused,
                   s.attempts, s.verify_seconds, s.created_at, s.finished_at
            FROM submissions s
            WHERE s.state IN {FINAL}""",
        ),
        # Reward over time per generator and model (UTC days).
        (
            "v_reward_daily",
            f"""
            SELECT {_day("s.finished_at")} AS day, s.generator, s.model, s.task,
                   COUNT(*) AS submissions,
                   SUM(CASE WHEN s.verdict = 'pass' THEN 1 ELSE 0 END) AS passed,
                   COUNT(s.reward) AS rewarded,
                   AVG(s.reward) AS mean_reward,
                   MAX(s.reward) AS max_reward
            FROM submissions s
            WHERE s.state IN {FINAL}
            GROUP BY {_day("s.finished_at")}, s.generator, s.model, s.task""",
        ),
        # Verdict mix per task, generator and model.
        (
            "v_verdict_mix",
            f"""
            SELECT s.task, s.generator, s.model, s.verdict, COUNT(*) AS submissions
            FROM submissions s
            WHERE s.state IN {FINAL}
            GROUP BY s.task, s.generator, s.model, s.verdict""",
        ),
        # Per submission and dtype: how many cases passed and the mean case reward (NULL unless every case of
        # that dtype has one, e.g. under the interpreter). Reused answers have no case rows of their own.
        (
            "v_submission_dtype_scores",
            """
            SELECT c.submission_id, s.task, c.dtype,
                   COALESCE(s.worker_gpu_class, s.gpu_class) AS gpu_class,
                   s.source_sha256, s.generator, s.model, s.finished_at,
                   COUNT(*) AS cases_total,
                   SUM(CASE WHEN c.verdict = 'pass' THEN 1 ELSE 0 END) AS cases_passed,
                   COUNT(r.value) AS cases_rewarded,
                   CASE WHEN COUNT(r.value) = COUNT(*) THEN AVG(r.value) END AS mean_reward
            FROM case_results c
            JOIN submissions s ON s.id = c.submission_id
            LEFT JOIN rewards r ON r.case_result_id = c.id
            GROUP BY c.submission_id, s.task, c.dtype, COALESCE(s.worker_gpu_class, s.gpu_class),
                     s.source_sha256, s.generator, s.model, s.finished_at""",
        ),
        # The best passing, rewarded submission per task, dtype and GPU class (earliest wins ties).
        (
            "v_best_per_task_dtype",
            """
            SELECT task, dtype, gpu_class, submission_id, source_sha256, generator, model,
                   mean_reward AS best_reward, finished_at
            FROM (
                SELECT v.*, ROW_NUMBER() OVER (
                    PARTITION BY v.task, v.dtype, v.gpu_class
                    ORDER BY v.mean_reward DESC, v.finished_at ASC) AS position_in_group
                FROM v_submission_dtype_scores v
                WHERE v.cases_passed = v.cases_total AND v.mean_reward IS NOT NULL
            ) ranked
            WHERE position_in_group = 1""",
        ),
        # Case-level timing statistics next to their verdicts and error metrics.
        (
            "v_case_timings",
            """ SELECT c.submission_id, c.task, c.dtype, c.case_id, c.case_kind, c.verdict, c.max_abs,
            c.rel_l2, t.kind AS timing_kind, t.candidate_median_us, t.baseline_median_us, t.speedup,
            t.candidate_cv, t.achieved_bandwidth_gbps, r.value AS reward, r.speed_score, r.instability, r.spec
            AS reward_spec FROM case_results c LEFT JOIN timings t ON t.case_result_id = c.id LEFT JOIN
            rewards r ON r.case_result_id = c.id""",
        ),
    ]


def upgrade() -> None:
    for name, body in _views():
        op.execute(f"CREATE VIEW {name} AS {body.strip()}")


def downgrade() -> None:
    for name, _ in reversed(_views()):
        op.execute(f"DROP VIEW IF EXISTS {name}")
