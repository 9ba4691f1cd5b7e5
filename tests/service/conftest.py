"""Fixtures of the service suite: a fresh Postgres database per session (migrated by Alembic), real Redis under a
per-session key prefix, a real Celery worker subprocess on a per-session queue, and the API served by uvicorn on a
free port. State (tables, Redis keys) is flushed between tests. Kernels run under the Triton interpreter, without
the sandbox (its own suite covers it), on one tiny case so the whole suite stays within a few minutes on 2 cores.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import redis
import uvicorn
from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from kernelproof_core.settings import Settings
from kernelproof_core.store import keys
from kernelproof_core.store.migrate import upgrade
from kernelproof_core.store.session import make_engine, make_session_factory, session_factory_for

REPO = Path(__file__).resolve().parents[2]
PG_ADMIN_DSN = os.environ.get("KERNELPROOF_TEST_PG_ADMIN_DSN", "postgresql://postgres@127.0.0.1:5432/test")
REDIS_URL = os.environ.get("KERNELPROOF_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
SESSION_TAG = uuid.uuid4().hex[:10]
TABLES = [
    "rewards",
    "timings",
    "case_results",
    "reports",
    "attempts",
    "submission_tags",
    "submissions",
    "environments",
    "api_keys",
]
# One tiny interpreter case, one dtype, one timing sample: what every real verification in this suite runs.
TINY_CAMPAIGN: dict[str, Any] = {"preset": "quick", "case_ids": ["n1"], "samples": 1}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.service)


class NullDispatcher:
    """Commits rows but never enqueues them (a lost message, or an API nobody works for)."""

    def dispatch(self, submission_id: str, gpu_class: str | None) -> None:
        del submission_id, gpu_class

    def queue_depth(self, gpu_class: str | None) -> int | None:
        return 0

    def ping(self) -> bool:
        return True


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    name = f"kernelproof_test_{SESSION_TAG}"
    try:
        admin = psycopg.connect(PG_ADMIN_DSN, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.skip(f"PostgreSQL unavailable: {exc}")
    admin.execute(f'CREATE DATABASE "{name}"')
    base = PG_ADMIN_DSN.rsplit("/", 1)[0]
    yield f"{base.replace('postgresql://', 'postgresql+psycopg://', 1)}/{name}"
    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.close()


@pytest.fixture(scope="session")
def redis_client() -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(REDIS_URL)
    try:
        client.ping()
    except redis.ConnectionError as exc:
        pytest.skip(f"Redis unavailable: {exc}")
    yield client
    flush_redis(client)
    client.close()


def flush_redis(client: redis.Redis) -> None:
    for key in client.scan_iter(match=f"kptest-{SESSION_TAG}:*", count=1000):
        client.delete(key)


@pytest.fixture(scope="session")
def service_env(pg_url: str, redis_client: redis.Redis, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """KERNELPROOF_* variables of this session, for the worker subprocesses and Settings alike."""
    return {
        "KERNELPROOF_DATABASE_URL": pg_url,
        "KERNELPROOF_BROKER_URL": REDIS_URL,
        "KERNELPROOF_BROKER_KEY_PREFIX": f"kptest-{SESSION_TAG}:",
        "KERNELPROOF_QUEUE_PREFIX": f"kptest{SESSION_TAG}",
        "KERNELPROOF_QUEUE_BACKEND": "celery",
        "KERNELPROOF_SANDBOX_ENABLED": "false",
        "KERNELPROOF_SERVICE_DEVICE": "interpreter",
        "KERNELPROOF_JOB_DEADLINE_S": "90",
        "KERNELPROOF_JOB_LEASE_S": "6",  # every worker here renews leases (every 2 s) through its jobs
        "KERNELPROOF_JOB_MAX_ATTEMPTS": "3",
        "KERNELPROOF_SWEEPER_INTERVAL_S": "1",
        "KERNELPROOF_SWEEPER_LOST_MESSAGE_AFTER_S": "4",
        "KERNELPROOF_CELERY_VISIBILITY_TIMEOUT_S": "120",
        "KERNELPROOF_API_LONG_POLL_INTERVAL_S": "0.2",
        "KERNELPROOF_DATA_DIR": str(tmp_path_factory.mktemp("kernelproof-data")),
    }


def settings_from(env: dict[str, str], **overrides: Any) -> Settings:
    values: dict[str, Any] = {k.removeprefix("KERNELPROOF_").lower(): v for k, v in env.items()}
    values.update(overrides)
    return Settings(**values)


@pytest.fixture(scope="session")
def settings(service_env: dict[str, str]) -> Settings:
    return settings_from(service_env)


@pytest.fixture(scope="session")
def migrated(pg_url: str) -> str:
    upgrade(pg_url)
    return pg_url


@pytest.fixture(scope="session")
def sessions(settings: Settings, migrated: str) -> sessionmaker[Session]:
    return session_factory_for(settings)


def start_worker(env: dict[str, str], queues: list[str], log_path: Path, name: str) -> subprocess.Popen[bytes]:
    """A real `celery worker` process (solo pool, one job at a time), ready when it says so."""
    log_file = log_path.open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "worker.celery_app",
            "worker",
            "--pool=solo",
            "--concurrency=1",
            "--without-gossip",
            "--without-mingle",
            "-Q",
            ",".join(queues),
            "-n",
            f"{name}@%h",
            "--loglevel",
            "INFO",
        ],
        cwd=REPO,
        env={**os.environ, **env},
        stdout=log_file,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if b" ready." in log_path.read_bytes():
            return proc
        if proc.poll() is not None:
            raise RuntimeError(f"worker exited early:\n{log_path.read_text()[-3000:]}")
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"worker not ready:\n{log_path.read_text()[-3000:]}")


def stop_process(proc: subprocess.Popen[bytes], timeout: float = 15) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="session")
def celery_worker(
    service_env: dict[str, str], migrated: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[subprocess.Popen[bytes]]:
    log_path = tmp_path_factory.mktemp("worker") / "worker.log"
    proc = start_worker(service_env, [f"kptest{SESSION_TAG}.any"], log_path, f"kptest-{SESSION_TAG}")
    yield proc
    stop_process(proc)


def serve_in_thread(app: FastAPI) -> tuple[str, uvicorn.Server, threading.Thread]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}", server, thread


@pytest.fixture(scope="session")
def api_url(settings: Settings, migrated: str) -> Iterator[str]:
    """The production app (Celery dispatch) served over real HTTP."""
    from api.app import create_app

    url, server, thread = serve_in_thread(create_app(settings))
    yield url
    server.should_exit = True
    thread.join(10)


@pytest.fixture(autouse=True)
def clean_state(request: pytest.FixtureRequest) -> Iterator[None]:
    """Empty tables and this session's Redis keys after every test that touched them."""
    yield
    if "sessions" not in request.fixturenames:
        return
    sessions: sessionmaker[Session] = request.getfixturevalue("sessions")
    # A worker's sweeper may hold row locks on one table while TRUNCATE wants all of them: Postgres then picks one
    # side as a deadlock victim. Retry the cleanup (the sweeper's compare-and-set tolerates losing).
    for attempt in range(5):
        try:
            with sessions() as session:
                session.execute(text(f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY CASCADE"))
                session.commit()
            break
        except OperationalError:
            if attempt == 4:
                raise
            time.sleep(0.2 * (attempt + 1))
    flush_redis(request.getfixturevalue("redis_client"))


@pytest.fixture
def api_key(sessions: sessionmaker[Session]) -> str:
    with sessions() as session:
        return keys.create_key(session, "test").plaintext


@pytest.fixture
def http(api_url: str, api_key: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=api_url, headers={"Authorization": f"Bearer {api_key}"}, timeout=120) as client:
        yield client


def wait_final(http: httpx.Client, submission_id: str, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body: dict[str, Any] = http.get(f"/v1/submissions/{submission_id}", params={"wait": 20}).json()
        if body["state"] in ("finished", "error"):
            return body
    raise AssertionError(f"submission {submission_id} not final after {timeout} s")


@pytest.fixture(params=["postgresql", "sqlite"])
def fresh_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty database of its own (not the session one), on each backend: migrations and state machines."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'fresh.sqlite3'}"
        return
    name = f"kernelproof_fresh_{uuid.uuid4().hex[:8]}"
    try:
        admin = psycopg.connect(PG_ADMIN_DSN, autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        pytest.skip(f"PostgreSQL unavailable: {exc}")
    admin.execute(f'CREATE DATABASE "{name}"')
    yield f"{PG_ADMIN_DSN.rsplit('/', 1)[0].replace('postgresql://', 'postgresql+psycopg://', 1)}/{name}"
    admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    admin.close()


@pytest.fixture
def db(fresh_database: str) -> Iterator[sessionmaker[Session]]:
    """Sessions on a fresh, migrated database of its own, on each backend (fresh_database's parameters)."""
    upgrade(fresh_database)
    engine = make_engine(fresh_database)
    yield make_session_factory(engine)
    engine.dispose()
