"""Alembic environment: the URL comes from the caller (kernelproof migrate, tests) or from the settings."""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy import Connection

from kernelproof_core.settings import Settings
from kernelproof_core.store.models import Base
from kernelproof_core.store.session import database_url, make_engine

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logging", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def _url() -> str:
    return config.attributes.get("url") or database_url(Settings())


def _configure(connection: Connection | None = None) -> None:
    # render_as_batch: SQLite cannot ALTER most things in place; batch mode rebuilds tables there.
    if connection is None:
        context.configure(
            url=_url(), literal_binds=True, target_metadata=target_metadata, render_as_batch=True, compare_type=True
        )
    else:
        context.configure(
            connection=connection, target_metadata=target_metadata, render_as_batch=True, compare_type=True
        )


def run_migrations_offline() -> None:
    _configure()
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    engine = make_engine(_url())
    try:
        with engine.connect() as connection:
            _configure(connection)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
