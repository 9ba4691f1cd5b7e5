"""Alembic is the only way tables and views are created, on Postgres and SQLite alike, and it matches the models."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from kernelproof_core.store.migrate import downgrade, upgrade
from kernelproof_core.store.models import Base
from kernelproof_core.store.session import make_engine

VIEWS = {
    "v_submission_rewards",
    "v_reward_daily",
    "v_verdict_mix",
    "v_submission_dtype_scores",
    "v_best_per_task_dtype",
    "v_case_timings",
}


def test_upgrade_matches_models_and_downgrade_is_clean(fresh_database: str) -> None:
    upgrade(fresh_database)
    engine = make_engine(fresh_database)
    try:
        with engine.connect() as conn:
            diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), Base.metadata)
            assert diff == [], diff
            inspector = inspect(conn)
            assert set(inspector.get_view_names()) == VIEWS
            indexed = {ix["name"] for ix in inspector.get_indexes("submissions")}
            assert {
                "ix_submissions_task_created_at",
                "ix_submissions_verdict_created_at",
                "ix_submissions_client_id_created_at",
                "ix_submissions_created_at_id",
            } <= indexed
        downgrade(fresh_database)
        with engine.connect() as conn:
            inspector = inspect(conn)
            assert set(inspector.get_table_names()) <= {"alembic_version"} and not inspector.get_view_names()
        upgrade(fresh_database)  # and back up again
    finally:
        engine.dispose()
