"""A database that does not answer is an outage, not a bug. The API answers `503 database-unavailable` with
Retry-After (API.md), which the Python client retries, so a submission sent during the outage lands exactly once when
the database is back; a worker whose verification finished during the outage keeps trying to record the verdict
(`worker_record_retry_s`) instead of leaving the GPU time to be spent again. Real PostgreSQL throughout: the outage is
a database that does not exist yet, or one that refuses connections (`ALLOW_CONNECTIONS false`, backends ended)."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Iterator

import httpx
import psycopg
import pytest
from sqlalchemy import func, select, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from api.app import create_app
from kernelproof_core.campaign import Campaign
from kernelproof_core.client import AsyncClient, Client
from kernelproof_core.settings import Settings
from kernelproof_core.store.migrate import upgrade
from kernelproof_core.store.models import ReportRow, Submission
from kernelproof_core.store.session import make_engine, make_session_factory
from kernelproof_core.store.submissions import NewSubmission, create_submission
from kernelproof_core.store.transitions import Claim
from tests.service.candidates import GOOD
from tests.service.conftest import PG_ADMIN_DSN, TINY_CAMPAIGN, NullDispatcher, serve_in_thread
from worker.execution import process_submission
from worker.job_host import AttemptResult, JobHost

OUTAGE = "urn:kernelproof:problem:database-unavailable"
ONE_CASE = Campaign(device="interpreter", dtypes=["bfloat16"], case_set="interpreter", case_ids=["n1"], measure=False)


def url_of(name: str) -> str:
    return f"{PG_ADMIN_DSN.rsplit('/', 1)[0].replace('postgresql://', 'postgresql+psycopg://', 1)}/{name}"


@pytest.fixture
def admin() -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(PG_ADMIN_DSN, autocommit=True, connect_timeout=5) as conn:
        yield conn


def test_an_outage_is_a_retryable_503_and_the_retried_submit_lands_once(
        settings: Settings, admin: psycopg.Connection[tuple[object, ...]]) -> None:
    name = f"kernelproof_outage_{uuid.uuid4().hex[:8]}"
    url = url_of(name)
    app = create_app(settings.model_copy(update={"database_url": url, "api_auth_required": False}),
                     dispatcher=NullDispatcher())
    base, server, thread = serve_in_thread(app)
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


class OutageAfterTheRun(JobHost):
    """The real job host; as its attempt ends, the database starts refusing connections (every backend of it ended),
    for `outage_s` (None: until the test ends it). So the worker's verdict meets the outage, deterministically."""

    def __init__(self, admin: psycopg.Connection[tuple[object, ...]], name: str, outage_s: float | None) -> None:
        super().__init__(persistent=False)
        self.admin, self.name, self.outage_s = admin, name, outage_s
        self.restored = threading.Event()

    def run(self, claim: Claim, sandbox: bool) -> AttemptResult:
        result = super().run(claim, sandbox)
        self.admin.execute(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS false')
        self.admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (self.name,))
        if self.outage_s is not None:
            threading.Timer(self.outage_s, self.restore).start()
        return result

    def restore(self) -> None:
        self.admin.execute(f'ALTER DATABASE "{self.name}" ALLOW_CONNECTIONS true')
        self.restored.set()


@pytest.mark.parametrize("outage_s", [1.5, None], ids=["recovers", "outlasts-the-retries"])
def test_a_verdict_finished_during_an_outage_is_recorded_when_the_database_returns(
        settings: Settings, admin: psycopg.Connection[tuple[object, ...]], caplog: pytest.LogCaptureFixture,
        outage_s: float | None) -> None:
    name = f"kernelproof_outage_{uuid.uuid4().hex[:8]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    upgrade(url_of(name))
    engine = make_engine(url_of(name))
    sessions = make_session_factory(engine)
    host = OutageAfterTheRun(admin, name, outage_s)
    try:
        with sessions() as session:
            sid = create_submission(session, NewSubmission(
                task="rms_norm", source_text=GOOD, campaign=ONE_CASE, campaign_preset=None, gpu_class=None,
                metadata={}, client_id=None, request_sha256="0" * 64), reuse_verdicts=False).submission.id
        patience = settings.model_copy(update={"worker_record_retry_s": 30.0 if outage_s else 2.0})
        caplog.set_level(logging.WARNING, logger="worker.execution")
        if outage_s is None:  # the database stays away past the retries: the error reaches Celery (and the sweeper)
            with pytest.raises(OperationalError):
                process_submission(sessions, patience, sid, "outage-test", lambda *_: None, host)
            assert "could not be recorded" in caplog.text
            host.restore()
        else:
            status = process_submission(sessions, patience, sid, "outage-test", lambda *_: None, host)
            assert status == "pass" and host.restored.is_set()
            assert "not recorded yet, the database did not answer" in caplog.text
        with sessions() as session:
            row = session.get(Submission, sid)
            assert row is not None and row.attempts == 1
            assert (row.state, row.verdict) == (("finished", "pass") if outage_s else ("running", None))
    finally:
        host.restore()
        host.close()
        engine.dispose()
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.parametrize("asynchronous", [False, True], ids=["Client", "AsyncClient"])
def test_a_wait_sits_out_an_outage_longer_than_its_polls_retries(
        settings: Settings, admin: psycopg.Connection[tuple[object, ...]], asynchronous: bool) -> None:
    """The database refuses connections for about 5 s while a client waits for a verdict with one retry a poll
    (2 s of Retry-After): the wait rides it out and returns the verdict written once the database is back."""
    name = f"kernelproof_outage_{uuid.uuid4().hex[:8]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    upgrade(url_of(name))
    app = create_app(settings.model_copy(update={"database_url": url_of(name), "api_auth_required": False,
                                                 "api_long_poll_interval_s": 0.2}), dispatcher=NullDispatcher())
    base, server, thread = serve_in_thread(app)

    def outage_then_verdict(sid: str) -> None:
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))
        time.sleep(5.0)
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        with psycopg.connect(url_of(name).replace("+psycopg", ""), autocommit=True) as db:
            db.execute("UPDATE submissions SET state = 'finished', verdict = 'pass', finished_at = now() "
                       "WHERE id = %s", (sid,))

    outage: threading.Timer | None = None
    try:
        with Client(base, api_key="") as kp:
            sid = kp.submit("rms_norm", GOOD, campaign=TINY_CAMPAIGN)["id"]
        outage = threading.Timer(0.5, outage_then_verdict, (sid,))
        outage.start()
        if asynchronous:
            async def wait() -> dict[str, object]:
                async with AsyncClient(base, api_key="", retries=1) as kp:
                    return await kp.wait(sid, timeout=60, poll_s=1)

            done = asyncio.run(wait())
        else:
            with Client(base, api_key="", retries=1) as kp:
                done = kp.wait(sid, timeout=60, poll_s=1)
        assert done["state"] == "finished" and done["verdict"] == "pass"
    finally:
        if outage is not None:
            outage.join()
        admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        server.should_exit = True
        thread.join(timeout=30)
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class AnswerLostAfterCommit:
    """The real session factory, except that the worker's first recording transaction commits and then loses its
    connection before the worker hears back (an ambiguous commit): the fault is injected, the database is real."""

    def __init__(self, real: sessionmaker[Session]) -> None:
        self.real, self.opened = real, 0

    def __call__(self) -> Session:
        self.opened += 1
        session = self.real()
        if self.opened != 2:  # the first session claims; the second records
            return session
        close = session.close

        def close_then_drop() -> None:
            close()
            raise OperationalError("COMMIT", None, ConnectionError("server closed the connection unexpectedly"))

        session.close = close_then_drop  # type: ignore[method-assign]
        return session


def test_a_verdict_whose_commit_answer_was_lost_is_not_recorded_twice(
        settings: Settings, admin: psycopg.Connection[tuple[object, ...]]) -> None:
    name = f"kernelproof_outage_{uuid.uuid4().hex[:8]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    upgrade(url_of(name))
    engine = make_engine(url_of(name))
    sessions = make_session_factory(engine)
    host = JobHost(persistent=False)
    try:
        with sessions() as session:
            sid = create_submission(session, NewSubmission(
                task="rms_norm", source_text=GOOD, campaign=ONE_CASE, campaign_preset=None, gpu_class=None,
                metadata={}, client_id=None, request_sha256="0" * 64), reuse_verdicts=False).submission.id
        lossy = AnswerLostAfterCommit(sessions)
        # A lease long enough that no renewal (a session of its own, from the lease thread) lands between the claim
        # and the recording, however slow the host: under load one did (a 40 s verification), took the injected
        # fault, and the count below was 4.
        calm = settings.model_copy(update={"job_lease_s": 3600.0})
        status = process_submission(lossy, calm, sid, "lost-answer", lambda *_: None, host)  # type: ignore[arg-type]
        assert status == "pass" and lossy.opened == 3  # claim, the lost answer, the retry that found the report
        with sessions() as session:
            outcomes = session.execute(text("SELECT outcome FROM attempts WHERE submission_id = :s"), {"s": sid})
            assert [r[0] for r in outcomes] == ["finished"]
            assert session.scalar(select(func.count()).select_from(ReportRow)) == 1
    finally:
        host.close()
        engine.dispose()
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
