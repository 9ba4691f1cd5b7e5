"""Running the Alembic migrations (the only way tables and views are created) from code and the CLI."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from kernelproof_core.store.session import make_engine

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"


def alembic_config(url: str) -> Config:
    """A config that needs no alembic.ini: the URL travels in `attributes` (no %-interpolation of
    passwords)."""
    if not MIGRATIONS_DIR.is_dir():
        raise FileNotFoundError(f"migrations not found at {MIGRATIONS_DIR}")
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.attributes["url"] = url
    return cfg


def upgrade(url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str = "base") -> None:
    command.downgrade(alembic_config(url), revision)


def at_head(url: str) -> bool:
    """Whether the database's schema is at the newest migration (False for an empty database)."""
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            current = set(MigrationContext.configure(conn).get_current_heads())
    finally:
        engine.dispose()
    return current == set(ScriptDirectory.from_config(alembic_config(url)).get_heads())
