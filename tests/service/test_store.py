"""The state machine (compare-and-set with the attempt number as fencing token) and the reward views, on a
database of their own per backend. Rewards here are synthetic CUDA rewards: the interpreter never produces any."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select, text, update
from sqlalchemy.orm import Session, sessionmaker

from kernelproof_core.campaign import Campaign, CandidateJob
from kernelproof_core.executors import make_executor
from kernelproof_core.report.models import Report, Reward
from kernelproof_core.store import queries, results, transitions
from kernelproof_core.store.migrate import upgrade
from kernelproof_core.store.models import ReportRow, Submission
from kernelproof_core.store.session import make_engine, make_session_factory
from kernelproof_core.store.submissions import NewSubmission, create_submission
from kernelproof_core.store.transitions import ClaimOutcome
from kernelproof_core.store.types import utcnow
from kernelproof_core.verify import run_verification
from tests.service.candidates import GOOD

CAMPAIGN = Campaign(
    device="interpreter", dtypes=["bfloat16"], case_set="interpreter", case_ids=["n1", "tail127"], samples=1
)


@pytest.fixture(scope="module")
def template_report() -> Report:
    """A real (interpreter) report of a passing candidate, verified in-process once for the module."""
    job = CandidateJob(task="rms_norm", source=GOOD.encode(), origin="submission")
    report = run_verification([job], CAMPAIGN, make_executor(sandbox=False), command="test")
    assert report.summary.verdict.value == "pass"
    return report


@pytest.fixture
def db(fresh_database: str) -> Iterator[sessionmaker[Session]]:
    upgrade(fresh_database)
    engine = make_engine(fresh_database)
    yield make_session_factory(engine)
    engine.dispose()


def new_submission(db: sessionmaker[Session], source: str = GOOD, generator: str = "g") -> str:
    new = NewSubmission(
        task="rms_norm",
        source_text=source,
        campaign=CAMPAIGN,
        campaign_preset="quick",
        gpu_class="h200",
        metadata={"generator": generator},
        client_id=None,
        request_sha256="0" * 64,
    )
    with db() as session:
        return create_submission(session, new, reuse_verdicts=False).submission.id


def claim(db: sessionmaker[Session], sid: str, **kwargs: Any) -> tuple[ClaimOutcome, transitions.Claim | None]:
    options: dict[str, Any] = {"worker": "test", "gpu_class": "h200", "deadline_s": 600.0, "max_attempts": 3}
    with db() as session:
        return transitions.claim(session, sid, **{**options, **kwargs})


def with_cuda_rewards(template: Report, values: list[float], spec: str = "kernelproof.reward.v2") -> Report:
    report = template.model_copy(deep=True)
    for case, value in zip(report.cases, values, strict=True):
        assert case.timing is not None
        case.timing.kind = "cuda_events"
        case.reward = Reward(spec=spec, value=value, speed_score=value, instability=0.0)
    report.summary.reward = sum(values) / len(values)
    return report


def test_duplicate_claims_and_stale_attempts_give_one_verdict(
    db: sessionmaker[Session], template_report: Report
) -> None:
    sid = new_submission(db)
    outcome, first = claim(db, sid)
    assert outcome is ClaimOutcome.CLAIMED and first is not None and first.attempt_no == 1
    assert claim(db, sid)[0] is ClaimOutcome.BUSY  # a second delivery while the first runs
    with db() as session:  # the first worker goes silent past its deadline ...
        session.execute(
            update(Submission).where(Submission.id == sid).values(deadline_at=utcnow() - timedelta(seconds=1))
        )
        session.commit()
    outcome, second = claim(db, sid)  # ... and a redelivered message takes over
    assert outcome is ClaimOutcome.CLAIMED and second is not None and second.attempt_no == 2
    with db() as session:
        assert not results.finish_with_report(session, first, template_report)  # the stale attempt loses
        assert results.finish_with_report(session, second, template_report)
        assert session.scalar(select(func.count()).select_from(ReportRow)) == 1
        outcomes = session.execute(text("SELECT attempt_no, outcome FROM attempts ORDER BY attempt_no")).all()
        assert [tuple(r) for r in outcomes] == [(1, "stale"), (2, "finished")]
    assert claim(db, sid)[0] is ClaimOutcome.FINAL
    assert claim(db, "f" * 32)[0] is ClaimOutcome.MISSING


def test_sweeper_requeues_then_gives_up(db: sessionmaker[Session]) -> None:
    sid = new_submission(db)
    for attempt in (1, 2, 3):
        outcome, current = claim(db, sid, deadline_s=-1.0)  # every attempt is born past its deadline
        assert outcome is ClaimOutcome.CLAIMED and current is not None and current.attempt_no == attempt
        with db() as session:
            requeued = transitions.requeue_expired(session, max_attempts=3)
        assert requeued == ([(sid, "h200")] if attempt < 3 else [])
    with db() as session:
        row = session.get(Submission, sid)
        assert row is not None and row.state == "error" and row.verdict == "infra_error"
        assert row.error is not None and "gave up after 3 attempts" in row.error


def test_reward_views_and_leaderboard_rank_by_reward(db: sessionmaker[Session], template_report: Report) -> None:
    rewards = {"slow": [0.1, 0.3], "fast": [1.0, 1.4], "fast-again": [0.9, 1.1]}
    sources = {"slow": GOOD + "\n# slow\n", "fast": GOOD + "\n# fast\n", "fast-again": GOOD + "\n# fast\n"}
    ids = {}
    for name, values in rewards.items():
        sid = ids[name] = new_submission(db, sources[name], generator="g-" + name.split("-")[0])
        _, current = claim(db, sid)
        assert current is not None
        with db() as session:
            assert results.finish_with_report(session, current, with_cuda_rewards(template_report, values))
    with db() as session:
        best = session.execute(text("SELECT * FROM v_best_per_task_dtype")).mappings().all()
        assert len(best) == 1 and best[0]["submission_id"] == ids["fast"]
        assert best[0]["best_reward"] == pytest.approx(1.2) and best[0]["gpu_class"] == "h200"
        daily = session.execute(text("SELECT generator, mean_reward FROM v_reward_daily ORDER BY generator"))
        assert [(g, round(r, 6)) for g, r in daily] == [("g-fast", 1.1), ("g-slow", 0.2)]
        runs = session.execute(text("SELECT COUNT(*) FROM rewards WHERE scope = 'run'")).scalar()
        assert runs == 3
        board = queries.leaderboard(session, "rms_norm", "bfloat16", "h200", limit=10)
    # One entry per source: the second run of the fast source does not take a second place.
    assert [e["submission_id"] for e in board] == [ids["fast"], ids["slow"]]
    assert board[0]["mean_reward"] == pytest.approx(1.2) and board[0]["cases_passed"] == 2

    # A reward of another spec (v1: launch-inclusive medians) is never ranked with v2 ones (migration 0004).
    old = new_submission(db, GOOD + "\n# scored under v1\n", generator="g-v1")
    _, current = claim(db, old)
    assert current is not None
    with db() as session:
        assert results.finish_with_report(
            session, current, with_cuda_rewards(template_report, [1.9, 1.9], spec="kernelproof.reward.v1"))
        assert old not in [e["submission_id"] for e in queries.leaderboard(session, "rms_norm", "bfloat16", "h200", 10)]
        v1_board = queries.leaderboard(session, "rms_norm", "bfloat16", "h200", 10, reward_spec="kernelproof.reward.v1")
        assert [e["submission_id"] for e in v1_board] == [old]
        best = session.execute(text("SELECT reward_spec, submission_id FROM v_best_per_task_dtype "
                                    "ORDER BY reward_spec")).all()
        assert [tuple(r) for r in best] == [("kernelproof.reward.v1", old), ("kernelproof.reward.v2", ids["fast"])]


def test_launch_inclusive_timings_have_columns_and_reach_the_case_view(
        db: sessionmaker[Session], template_report: Report) -> None:
    """Harness 0.4 timings: device-time medians plus the launch-inclusive medians, host time per call and launch
    overhead, queryable in SQL (migration 0003)."""
    from kernelproof_core.measurement.stats import summarize

    report = with_cuda_rewards(template_report, [0.5, 0.7])
    for case in report.cases:
        assert case.timing is not None
        case.timing.candidate_launch_inclusive = summarize([31.0, 30.0, 32.0])
        case.timing.baseline_launch_inclusive = summarize([60.0, 61.0, 59.0])
        case.timing.candidate_host_us_per_call = 28.5
        case.timing.launch_overhead_us = 5.0
    sid = new_submission(db, GOOD + "\n# launch columns\n", generator="g-launch")
    _, current = claim(db, sid)
    assert current is not None
    with db() as session:
        assert results.finish_with_report(session, current, report)
        rows = session.execute(text(
            "SELECT candidate_launch_inclusive_median_us, baseline_launch_inclusive_median_us, "
            "candidate_host_us_per_call, launch_overhead_us FROM v_case_timings WHERE submission_id = :sid"),
            {"sid": sid}).all()
    assert [tuple(r) for r in rows] == [(31.0, 60.0, 28.5, 5.0)] * len(report.cases)
