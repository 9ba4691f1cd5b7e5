"""The Python client, sync and async: submit, batch, wait, reports, listing, problems as APIError."""

from __future__ import annotations

import asyncio
import subprocess

import pytest

from kernelproof_core.client import APIError, AsyncClient, Client, submission_body
from tests.service.candidates import GOOD, NO_WEIGHT
from tests.service.conftest import TINY_CAMPAIGN

CAMPAIGN = {**TINY_CAMPAIGN, "measure": False}


def test_sync_client_submit_wait_and_report(api_url: str, api_key: str, celery_worker: subprocess.Popen[bytes]) -> None:
    with Client(api_url, api_key) as kp:
        sub = kp.submit(
            "rms_norm",
            GOOD.encode(),
            campaign=CAMPAIGN,
            metadata={"run_id": "client-1"},
            idempotency_key="client-key-1",
        )
        assert (
            kp.submit(
                "rms_norm", GOOD, campaign=CAMPAIGN, metadata={"run_id": "client-1"}, idempotency_key="client-key-1"
            )["id"]
            == sub["id"]
        )
        done = kp.wait(sub["id"], timeout=120, poll_s=10)
        assert done["verdict"] == "pass"
        assert kp.report(sub["id"])["summary"]["verdict"] == "pass"
        assert kp.report_markdown(sub["id"]).startswith("#")
        assert [s["id"] for s in kp.list_submissions(run_id="client-1")] == [sub["id"]]
        assert any(t["name"] == "rms_norm" for t in kp.tasks())
        assert kp.leaderboard(task="rms_norm")[0]["submission_id"] == sub["id"]
        with pytest.raises(APIError) as err:
            kp.submit("matmul", GOOD)
        assert err.value.status == 422 and err.value.type == "urn:kernelproof:problem:unknown-task"


def test_async_client_batch_and_wait(api_url: str, api_key: str, celery_worker: subprocess.Popen[bytes]) -> None:
    async def scenario() -> list[str]:
        async with AsyncClient(api_url, api_key) as kp:
            items = [
                submission_body("rms_norm", NO_WEIGHT, campaign={**CAMPAIGN, "case_ids": ["tail127"]}),
                submission_body("no_such_task", GOOD),
            ]
            results = await kp.submit_batch(items)
            assert [r["status"] for r in results] == [202, 422]
            done = await kp.wait(results[0]["submission"]["id"], timeout=120, poll_s=10)
            listed = [s["id"] async for s in kp.list_submissions(verdict="tolerance")]
            assert listed == [done["id"]]
            return [done["verdict"], str(done["reward"])]

    assert asyncio.run(scenario()) == ["tolerance", "-1.0"]
