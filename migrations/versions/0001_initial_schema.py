"""Initial schema: keys, submissions, attempts, environments, reports, case results, timings, rewards.

Written for both PostgreSQL and SQLite (batch mode for index creation; JSONB only as a Postgres variant).

Revision ID: 0001
Revises: (none)
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

# Frozen copies of the model column types: a migration must not change when the models do.
JSON_DOC = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
TIMESTAMP = sa.DateTime(timezone=True)

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("prefix", sa.String(length=16), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("rate_limit_per_minute", sa.Integer(), nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("revoked_at", TIMESTAMP, nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_api_keys_key_hash")),
    )
    with op.batch_alter_table("api_keys", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_api_keys_prefix"), ["prefix"], unique=False)

    op.create_table(
        "environments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("device", sa.String(length=16), nullable=False),
        sa.Column("hostname", sa.String(length=255), nullable=False),
        sa.Column("platform", sa.String(length=255), nullable=False),
        sa.Column("python", sa.String(length=32), nullable=False),
        sa.Column("torch", sa.String(length=64), nullable=False),
        sa.Column("triton", sa.String(length=64), nullable=False),
        sa.Column("cuda", sa.String(length=32), nullable=True),
        sa.Column("gpu_name", sa.String(length=128), nullable=True),
        sa.Column("gpu_capability", sa.String(length=16), nullable=True),
        sa.Column("driver", sa.String(length=64), nullable=True),
        sa.Column("harness_version", sa.String(length=64), nullable=False),
        sa.Column("detail", JSON_DOC, nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_environments")),
        sa.UniqueConstraint("fingerprint", name=op.f("uq_environments_fingerprint")),
    )
    op.create_table(
        "submissions",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("client_id", sa.Integer(), nullable=True),
        sa.Column("idempotency_scope", sa.String(length=300), nullable=True),
        sa.Column("request_sha256", sa.String(length=64), nullable=False),
        sa.Column("task", sa.String(length=64), nullable=False),
        sa.Column("source_text", sa.Text(), nullable=False),
        sa.Column("source_sha256", sa.String(length=64), nullable=False),
        sa.Column("dtypes", JSON_DOC, nullable=False),
        sa.Column("campaign_preset", sa.String(length=32), nullable=True),
        sa.Column("campaign", JSON_DOC, nullable=False),
        sa.Column("gpu_class", sa.String(length=32), nullable=True),
        sa.Column("metadata", JSON_DOC, nullable=False),
        sa.Column("generator", sa.String(length=200), nullable=True),
        sa.Column("model", sa.String(length=200), nullable=True),
        sa.Column("run_id", sa.String(length=200), nullable=True),
        sa.Column("cache_key", sa.String(length=64), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("verdict", sa.String(length=32), nullable=True),
        sa.Column("reward", sa.Float(), nullable=True),
        sa.Column("summary", JSON_DOC, nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("reused_from", sa.String(length=32), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(length=200), nullable=True),
        sa.Column("worker_gpu_class", sa.String(length=32), nullable=True),
        sa.Column("environment_id", sa.Integer(), nullable=True),
        sa.Column("verify_seconds", sa.Float(), nullable=True),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.Column("enqueued_at", TIMESTAMP, nullable=True),
        sa.Column("started_at", TIMESTAMP, nullable=True),
        sa.Column("deadline_at", TIMESTAMP, nullable=True),
        sa.Column("finished_at", TIMESTAMP, nullable=True),
        sa.ForeignKeyConstraint(["client_id"], ["api_keys.id"], name=op.f("fk_submissions_client_id_api_keys")),
        sa.ForeignKeyConstraint(
            ["environment_id"], ["environments.id"], name=op.f("fk_submissions_environment_id_environments")
        ),
        sa.ForeignKeyConstraint(
            ["reused_from"], ["submissions.id"], name=op.f("fk_submissions_reused_from_submissions")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_submissions")),
        sa.UniqueConstraint("idempotency_scope", name=op.f("uq_submissions_idempotency_scope")),
    )
    with op.batch_alter_table("submissions", schema=None) as batch_op:
        batch_op.create_index("ix_submissions_cache_key_state", ["cache_key", "state"], unique=False)
        batch_op.create_index("ix_submissions_client_id_created_at", ["client_id", "created_at"], unique=False)
        batch_op.create_index("ix_submissions_created_at_id", ["created_at", "id"], unique=False)
        batch_op.create_index(batch_op.f("ix_submissions_generator"), ["generator"], unique=False)
        batch_op.create_index(batch_op.f("ix_submissions_model"), ["model"], unique=False)
        batch_op.create_index(batch_op.f("ix_submissions_run_id"), ["run_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_submissions_source_sha256"), ["source_sha256"], unique=False)
        batch_op.create_index("ix_submissions_state_deadline_at", ["state", "deadline_at"], unique=False)
        batch_op.create_index("ix_submissions_state_enqueued_at", ["state", "enqueued_at"], unique=False)
        batch_op.create_index("ix_submissions_task_created_at", ["task", "created_at"], unique=False)
        batch_op.create_index("ix_submissions_verdict_created_at", ["verdict", "created_at"], unique=False)

    op.create_table(
        "attempts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("submission_id", sa.String(length=32), nullable=False),
        sa.Column("attempt_no", sa.Integer(), nullable=False),
        sa.Column("worker", sa.String(length=200), nullable=False),
        sa.Column("gpu_class", sa.String(length=32), nullable=True),
        sa.Column("started_at", TIMESTAMP, nullable=False),
        sa.Column("finished_at", TIMESTAMP, nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("environment_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["environment_id"], ["environments.id"], name=op.f("fk_attempts_environment_id_environments")
        ),
        sa.ForeignKeyConstraint(
            ["submission_id"],
            ["submissions.id"],
            name=op.f("fk_attempts_submission_id_submissions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_attempts")),
        sa.UniqueConstraint("submission_id", "attempt_no", name=op.f("uq_attempts_submission_id")),
    )
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_attempts_submission_id"), ["submission_id"], unique=False)

    op.create_table(
        "case_results",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("submission_id", sa.String(length=32), nullable=False),
        sa.Column("task", sa.String(length=64), nullable=False),
        sa.Column("dtype", sa.String(length=16), nullable=False),
        sa.Column("case_id", sa.String(length=64), nullable=False),
        sa.Column("case_kind", sa.String(length=16), nullable=False),
        sa.Column("dims", JSON_DOC, nullable=False),
        sa.Column("verdict", sa.String(length=32), nullable=False),
        sa.Column("failure_message", sa.Text(), nullable=True),
        sa.Column("tolerance", JSON_DOC, nullable=False),
        sa.Column("numel", sa.BigInteger(), nullable=True),
        sa.Column("max_abs", sa.Float(), nullable=True),
        sa.Column("max_rel", sa.Float(), nullable=True),
        sa.Column("mean_abs", sa.Float(), nullable=True),
        sa.Column("rmse", sa.Float(), nullable=True),
        sa.Column("rel_l2", sa.Float(), nullable=True),
        sa.Column("cosine", sa.Float(), nullable=True),
        sa.Column("mismatch_count", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(
            ["submission_id"],
            ["submissions.id"],
            name=op.f("fk_case_results_submission_id_submissions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_case_results")),
        sa.UniqueConstraint("submission_id", "dtype", "case_id", name=op.f("uq_case_results_submission_id")),
    )
    with op.batch_alter_table("case_results", schema=None) as batch_op:
        batch_op.create_index("ix_case_results_task_dtype_verdict", ["task", "dtype", "verdict"], unique=False)

    op.create_table(
        "submission_tags",
        sa.Column("submission_id", sa.String(length=32), nullable=False),
        sa.Column("tag", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(
            ["submission_id"],
            ["submissions.id"],
            name=op.f("fk_submission_tags_submission_id_submissions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("submission_id", "tag", name=op.f("pk_submission_tags")),
    )
    with op.batch_alter_table("submission_tags", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_submission_tags_tag"), ["tag"], unique=False)

    op.create_table(
        "reports",
        sa.Column("submission_id", sa.String(length=32), nullable=False),
        sa.Column("attempt_id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.String(length=64), nullable=False),
        sa.Column("schema_version", sa.String(length=16), nullable=False),
        sa.Column("body", JSON_DOC, nullable=False),
        sa.Column("created_at", TIMESTAMP, nullable=False),
        sa.ForeignKeyConstraint(["attempt_id"], ["attempts.id"], name=op.f("fk_reports_attempt_id_attempts")),
        sa.ForeignKeyConstraint(
            ["submission_id"],
            ["submissions.id"],
            name=op.f("fk_reports_submission_id_submissions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("submission_id", name=op.f("pk_reports")),
    )
    op.create_table(
        "rewards",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("submission_id", sa.String(length=32), nullable=False),
        sa.Column("case_result_id", sa.Integer(), nullable=True),
        sa.Column("scope", sa.String(length=8), nullable=False),
        sa.Column("spec", sa.String(length=64), nullable=False),
        sa.Column("value", sa.Float(), nullable=False),
        sa.Column("speed_score", sa.Float(), nullable=True),
        sa.Column("instability", sa.Float(), nullable=True),
        sa.Column("aggregate_rule", sa.String(length=200), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["case_result_id"],
            ["case_results.id"],
            name=op.f("fk_rewards_case_result_id_case_results"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["submission_id"],
            ["submissions.id"],
            name=op.f("fk_rewards_submission_id_submissions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rewards")),
    )
    with op.batch_alter_table("rewards", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_rewards_case_result_id"), ["case_result_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_rewards_submission_id"), ["submission_id"], unique=False)

    op.create_table(
        "timings",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("case_result_id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("warmups", sa.Integer(), nullable=False),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("invocations_per_sample", sa.Integer(), nullable=False),
        sa.Column("input_sets", sa.Integer(), nullable=False),
        sa.Column("candidate_median_us", sa.Float(), nullable=False),
        sa.Column("candidate_p95_us", sa.Float(), nullable=False),
        sa.Column("candidate_min_us", sa.Float(), nullable=False),
        sa.Column("candidate_cv", sa.Float(), nullable=False),
        sa.Column("baseline_median_us", sa.Float(), nullable=False),
        sa.Column("baseline_p95_us", sa.Float(), nullable=False),
        sa.Column("baseline_min_us", sa.Float(), nullable=False),
        sa.Column("baseline_cv", sa.Float(), nullable=False),
        sa.Column("candidate_samples_us", JSON_DOC, nullable=False),
        sa.Column("baseline_samples_us", JSON_DOC, nullable=False),
        sa.Column("candidate_device_us", sa.Float(), nullable=True),
        sa.Column("baseline_device_us", sa.Float(), nullable=True),
        sa.Column("speedup", sa.Float(), nullable=False),
        sa.Column("achieved_bandwidth_gbps", sa.Float(), nullable=True),
        sa.Column("min_bytes", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["case_result_id"],
            ["case_results.id"],
            name=op.f("fk_timings_case_result_id_case_results"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_timings")),
        sa.UniqueConstraint("case_result_id", name=op.f("uq_timings_case_result_id")),
    )


def downgrade() -> None:
    op.drop_table("timings")
    op.drop_table("rewards")
    op.drop_table("reports")
    op.drop_table("submission_tags")
    op.drop_table("case_results")
    op.drop_table("attempts")
    op.drop_table("submissions")
    op.drop_table("environments")
    op.drop_table("api_keys")
