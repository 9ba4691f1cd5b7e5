"""The state machine (compare-and-set with the attempt number as fencing token) and the reward views, on a
database of their own per backend. Rewards here are synthetic CUDA rewards: the interpreter never produces any."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select, text, update
from sqlalchemy.orm import Session, sessionmaker

from kernelproof_core.campaign import Campaign, CandidateJob
from kernelproof_core.executors import make_executor
from kernelproof_core.report.models import Report, Reward
from kernelproof_core.store import queries, results, transitions
from kernelproof_core.store.models import ReportRow, Submission
from kernelproof_core.store.submissions import NewSubmission, create_submission
from kernelproof_core.store.transitions import ClaimOutcome
from kernelproof_core.store.types import utcnow
from kernelproof_core.verdicts import Verdict
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


def new_submission(db: sessionmaker[Session], source: str = GOOD, generator: str = "g", task: str = "rms_norm",
                   metadata: dict[str, str] | None = None, reuse: bool = False) -> str:
    new = NewSubmission(
        task=task,
        source_text=source,
        campaign=CAMPAIGN,
        campaign_preset="quick",
        gpu_class="h200",
        metadata=metadata or {"generator": generator},
        client_id=None,
        request_sha256="0" * 64,
    )
    with db() as session:
        return create_submission(session, new, reuse_verdicts=reuse).submission.id


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
        per_spec = session.execute(text("SELECT reward_spec, submission_id FROM v_best_per_task_dtype "
                                        "ORDER BY reward_spec")).all()
        assert [tuple(r) for r in per_spec] == [("kernelproof.reward.v1", old), ("kernelproof.reward.v2", ids["fast"])]


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


# docs/OPERATIONS.md's ready-to-run queries: the SQLite forms of its two date filters, as the document gives them.
SQLITE_DATES = {"CURRENT_DATE - 7": "date('now', '-7 days')",
                "now() - interval '7 days'": "datetime('now', '-7 days')"}
OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "OPERATIONS.md"


def documented_queries(dialect: str) -> list[str]:
    """The statements of OPERATIONS.md's "Ready-to-run queries" block, in the backend's form."""
    doc = OPERATIONS.read_text()
    block = re.search(r"Ready-to-run queries(.*?)```sql\n(.*?)```", doc, re.S)
    assert block is not None, "OPERATIONS.md lost its ready-to-run queries"
    for pg_form, sqlite_form in SQLITE_DATES.items():  # the document states each substitution it needs
        assert f"`{sqlite_form}` for `{pg_form}`" in " ".join(block.group(1).split())
    queries = [q.strip() for q in block.group(2).split(";") if q.strip()]
    if dialect == "sqlite":
        for pg_form, sqlite_form in SQLITE_DATES.items():
            queries = [q.replace(pg_form, sqlite_form) for q in queries]
    return queries


def finish(db: sessionmaker[Session], sid: str, report: Report) -> None:
    _, current = claim(db, sid)
    assert current is not None
    with db() as session:
        assert results.finish_with_report(session, current, report)


def test_documented_queries_answer_on_both_backends(db: sessionmaker[Session], template_report: Report) -> None:
    """Every query OPERATIONS.md calls ready to run runs on this backend (the embedded default is SQLite) and
    answers from the rows a fleet's submissions leave: a reward day, a run id, a reused verdict, a near-miss, a
    retried attempt, CUDA timings of softmax."""
    meta = {"generator": "g-docs", "model": "m1", "run_id": "r7"}
    passed = new_submission(db, GOOD + "\n# docs\n", metadata=meta)
    finish(db, passed, with_cuda_rewards(template_report, [0.8, 1.2]))
    new_submission(db, GOOD + "\n# docs\n", metadata=meta, reuse=True)  # answered from the stored verdict

    near = template_report.model_copy(deep=True)  # case n1 just outside the tolerance
    near.cases[0].verdict = Verdict.TOLERANCE
    assert near.cases[0].error is not None
    near.cases[0].error.rel_l2 = 0.01
    near_miss = new_submission(db, GOOD + "\n# near\n", metadata={**meta, "model": "m2"})
    finish(db, near_miss, near)

    retried = new_submission(db, GOOD + "\n# retried\n", generator="g-retry")
    outcome, first = claim(db, retried, deadline_s=-1.0)  # its first worker never came back
    assert outcome is ClaimOutcome.CLAIMED and first is not None
    finish(db, retried, template_report)

    softmax_report = with_cuda_rewards(template_report, [0.5, 0.9])
    for case in softmax_report.cases:
        case.task = "softmax"
    softmax = new_submission(db, GOOD + "\n# softmax\n", task="softmax", generator="g-docs")
    finish(db, softmax, softmax_report)

    with db() as session:
        dialect = session.get_bind().dialect.name
        answers = [session.execute(text(q)).mappings().all() for q in documented_queries(dialect)]
    assert len(answers) == 8, "a query was added to or removed from OPERATIONS.md: assert what it answers here"
    daily, best, mix, run, slowest, near_misses, reuse, retries = answers

    today = {(r["generator"], r["model"]): r for r in daily}
    assert today[("g-docs", "m1")]["submissions"] == 2 and today[("g-docs", "m1")]["passed"] == 2
    assert float(today[("g-docs", "m1")]["mean_reward"]) == pytest.approx(1.0)
    assert {(r["task"], r["submission_id"]) for r in best} == {("rms_norm", passed), ("softmax", softmax)}
    assert {(r["task"], r["verdict"]) for r in mix} >= {("rms_norm", "pass"), ("softmax", "pass")}
    assert sum(float(r["pct"]) for r in mix if r["task"] == "rms_norm") == pytest.approx(100.0, abs=0.2)
    per_model = {r["model"]: r for r in run}
    assert set(per_model) == {"m1", "m2"} and float(per_model["m1"]["pass_rate"]) == 1.0
    assert sorted((r["submission_id"], r["case_id"]) for r in slowest) == [(softmax, "n1"), (softmax, "tail127")]
    assert [(r["submission_id"], r["case_id"]) for r in near_misses] == [(near_miss, "n1")]
    reuse_by = {r["generator"]: (r["reused"], r["total"]) for r in reuse}
    assert reuse_by["g-docs"] == (1, 4)  # passed, its reused twin, the near-miss, softmax
    history = [(r["id"], r["attempt_no"], r["outcome"]) for r in retries]
    assert history == [(retried, 1, "lost"), (retried, 2, "finished")]
