"""A database that does not answer is an outage, not a bug: `503 database-unavailable` with Retry-After (API.md),
which the Python client retries, so a submission sent during the outage lands exactly once when the database is back.
Here the outage is a database that does not exist yet, on the real PostgreSQL, created and migrated mid-retry."""

from __future__ import annotations

import threading
import uuid

import httpx
import psycopg
from sqlalchemy import func, select

from api.app import create_app
from kernelproof_core.client import Client
from kernelproof_core.settings import Settings
from kernelproof_core.store.migrate import upgrade
from kernelproof_core.store.models import Submission
from kernelproof_core.store.session import make_engine, make_session_factory
from tests.service.candidates import GOOD
from tests.service.conftest import PG_ADMIN_DSN, TINY_CAMPAIGN, NullDispatcher, serve_in_thread

OUTAGE = "urn:kernelproof:problem:database-unavailable"


def test_an_outage_is_a_retryable_503_and_the_retried_submit_lands_once(settings: Settings) -> None:
    name = f"kernelproof_outage_{uuid.uuid4().hex[:8]}"
    url = f"{PG_ADMIN_DSN.rsplit('/', 1)[0].replace('postgresql://', 'postgresql+psycopg://', 1)}/{name}"
    app = create_app(settings.model_copy(update={"database_url": url, "api_auth_required": False}),
                     dispatcher=NullDispatcher())
    base, server, thread = serve_in_thread(app)
    admin = psycopg.connect(PG_ADMIN_DSN, autocommit=True, connect_timeout=5)
    try:
        for method, path, headers in [("GET", f"/v1/submissions/{'a' * 32}", {}),  # a handler's query
                                      ("GET", "/v1/tasks", {"Authorization": "Bearer kp_unknown"})]:  # the gate's
            answer = httpx.request(method, base + path, headers=headers)
            assert answer.status_code == 503 and answer.headers["content-type"] == "application/problem+json"
            assert answer.json()["type"] == OUTAGE and answer.headers["retry-after"] == "2", answer.text

        def restore() -> None:  # the database comes back while the client waits out Retry-After
            admin.execute(f'CREATE DATABASE "{name}"')
            upgrade(url)

        comeback = threading.Timer(0.5, restore)
        comeback.start()
        with Client(base, api_key="", retries=4) as kp:
            sub = kp.submit("rms_norm", GOOD, campaign=TINY_CAMPAIGN, metadata={"generator": "outage"})
        comeback.join()
        engine = make_engine(url)
        with make_session_factory(engine)() as session:
            rows = session.scalars(select(Submission.id)).all()
            assert session.scalar(select(func.count()).select_from(Submission)) == 1
        engine.dispose()
        assert rows == [sub["id"]] and sub["state"] == "queued"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()
