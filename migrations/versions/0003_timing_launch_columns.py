"""Timings of harness 0.4: the medians are device time with launches hidden; the launch-inclusive medians, the host
time per call and the launch overhead get columns of their own (null for older rows and interpreter timings), and
`v_case_timings` shows them.

Plain ADD / DROP COLUMN (PostgreSQL; SQLite >= 3.35), with the view that reads the table dropped around them.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = (
    "candidate_launch_inclusive_median_us",
    "baseline_launch_inclusive_median_us",
    "candidate_host_us_per_call",
    "launch_overhead_us",
)
_CASE_TIMINGS = """SELECT c.submission_id, c.task, c.dtype, c.case_id, c.case_kind, c.verdict, c.max_abs,
c.rel_l2, t.kind AS timing_kind, t.candidate_median_us, t.baseline_median_us, t.speedup,
t.candidate_cv, t.achieved_bandwidth_gbps, {extra}r.value AS reward, r.speed_score, r.instability, r.spec
AS reward_spec FROM case_results c LEFT JOIN timings t ON t.case_result_id = c.id LEFT JOIN
rewards r ON r.case_result_id = c.id"""


def _case_timings(extra: str) -> None:
    op.execute("DROP VIEW IF EXISTS v_case_timings")
    op.execute(f"CREATE VIEW v_case_timings AS {_CASE_TIMINGS.format(extra=extra)}")


def upgrade() -> None:
    op.execute("DROP VIEW IF EXISTS v_case_timings")
    for name in COLUMNS:
        op.add_column("timings", sa.Column(name, sa.Float(), nullable=True))
    _case_timings("".join(f"t.{name}, " for name in COLUMNS))


def downgrade() -> None:
    op.execute("DROP VIEW IF EXISTS v_case_timings")
    for name in reversed(COLUMNS):
        op.drop_column("timings", name)
    _case_timings("")
