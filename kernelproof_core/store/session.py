"""Engines and sessions for PostgreSQL (production) and SQLite (the embedded default)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from sqlalchemy.orm import Session, sessionmaker

from kernelproof_core.settings import Settings

EMBEDDED_DB_NAME = "kernelproof.sqlite3"
# The database not answering (down, failing over, out of pooled connections, SQLite busy past its timeout): an outage
# to wait out or report as one (503 in the API, a retried record in the worker), never a bug or a candidate's fault.
UNAVAILABLE_ERRORS: tuple[type[Exception], ...] = (OperationalError, PoolTimeoutError)


def unavailable_reason(exc: Exception) -> str:
    """One line saying why the database did not answer (a driver's message runs to several lines, SQL included)."""
    text = str(exc)
    return text.splitlines()[0][:300] if text else type(exc).__name__


def database_url(settings: Settings) -> str:
    """The configured URL, psycopg 3 as the Postgres driver; empty means the embedded SQLite file."""
    url = settings.database_url.strip()
    if not url:
        path = Path(settings.data_dir).expanduser() / EMBEDDED_DB_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        return f"sqlite:///{path}"
    for bare in ("postgresql://", "postgres://"):
        if url.startswith(bare):
            return "postgresql+psycopg://" + url[len(bare) :]
    return url


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # WAL lets the API read while the embedded worker writes; busy_timeout makes writers queue instead of
    # failing; foreign keys are off by default in SQLite. The driver's own transaction handling is
    # switched off so that _sqlite_begin can start every transaction as IMMEDIATE.
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _sqlite_begin(connection: Any) -> None:
    # A deferred SQLite transaction that reads and then writes fails at once (SQLITE_BUSY_SNAPSHOT) when
    # another writer committed in between; taking the write lock up front makes writers wait their turn.
    connection.exec_driver_sql("BEGIN IMMEDIATE")


def make_engine(url: str) -> Engine:
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
        event.listen(engine, "begin", _sqlite_begin)
        return engine
    # pre_ping: API replicas outlive database restarts and failovers.
    return create_engine(url, pool_pre_ping=True, pool_size=10, max_overflow=20)


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    # expire_on_commit=False: rows are read after commit to build responses.
    return sessionmaker(engine, expire_on_commit=False)


def session_factory_for(settings: Settings) -> sessionmaker[Session]:
    return make_session_factory(make_engine(database_url(settings)))
