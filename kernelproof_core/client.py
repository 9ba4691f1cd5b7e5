"""Python client of the KernelProof service (httpx), synchronous and asynchronous.

    with Client("http://127.0.0.1:8000", api_key="kp_...") as kp:
        sub = kp.submit("rms_norm", Path("my_kernel.py").read_text(), campaign="quick")
        done = kp.wait(sub["id"])
        print(done["verdict"], done["reward"])

Every submit carries an Idempotency-Key (generated unless given), so the client retries transport errors, 429
and 502-504 without ever creating a second submission; `wait` sits such faults out until its own timeout. Errors are
raised as `APIError` with the problem document.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx

from kernelproof_core.settings import get_settings

FINAL_STATES = ("finished", "error")
RETRY_STATUSES = (429, 502, 503, 504)
MAX_BACKOFF_S = 30.0


class APIError(Exception):
    """The service answered with an error; `problem` is its RFC 9457 document (type, title, detail...)."""

    def __init__(self, status: int, problem: dict[str, Any]) -> None:
        self.status, self.problem = status, problem
        self.type = str(problem.get("type", ""))
        super().__init__(f"{status} {problem.get('title', '')}: {problem.get('detail', '')}".strip())


def submission_body(
    task: str,
    source: str | bytes | Path,
    *,
    dtypes: list[str] | None = None,
    campaign: str | dict[str, Any] = "standard",
    gpu_class: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The JSON body of one submission (also one item of a batch)."""
    if isinstance(source, Path):
        source = source.read_bytes()
    text = source.decode("utf-8") if isinstance(source, bytes) else source
    body: dict[str, Any] = {"task": task, "source": text, "campaign": campaign}
    if dtypes:
        body["dtypes"] = dtypes
    if gpu_class:
        body["gpu_class"] = gpu_class
    if metadata:
        body["metadata"] = metadata
    return body


def is_final(submission: dict[str, Any]) -> bool:
    return submission.get("state") in FINAL_STATES


class _Common:
    def __init__(self, url: str | None, api_key: str | None, retries: int) -> None:
        settings = get_settings()
        self.url = (url or settings.client_url).rstrip("/")
        key = api_key if api_key is not None else settings.client_api_key
        self.headers = {"Accept": "application/json"}
        if key:
            self.headers["Authorization"] = f"Bearer {key}"
        self.retries = retries

    @staticmethod
    def _result(response: httpx.Response) -> Any:
        if response.status_code >= 400:
            try:
                problem = response.json()
            except ValueError:
                problem = {"title": response.reason_phrase, "detail": response.text[:500]}
            raise APIError(response.status_code, problem if isinstance(problem, dict) else {"detail": problem})
        if response.headers.get("content-type", "").startswith("text/"):
            return response.text
        return response.json()

    @staticmethod
    def _backoff(attempt: int, response: httpx.Response | None) -> float:
        if response is not None and response.headers.get("retry-after", "").isdigit():
            return min(MAX_BACKOFF_S, float(response.headers["retry-after"]))
        return min(MAX_BACKOFF_S, 0.5 * 2**attempt)

    @staticmethod
    def _outage_pause(exc: Exception, attempt: int, deadline: float) -> float | None:
        """While waiting for a verdict, how long to sit out a fault that outlasted the request's own retries (the
        service unreachable, 429, 502-504: a database failover, a restart); None for anything else, or once the
        wait's deadline is past. A wait is bounded by its own timeout, not by three retries of one poll."""
        if isinstance(exc, APIError) and exc.status not in RETRY_STATUSES:
            return None
        if not isinstance(exc, (APIError, httpx.TransportError)):
            return None
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        hinted = exc.problem.get("retry_after_s") if isinstance(exc, APIError) else None
        pause = float(hinted) if isinstance(hinted, (int, float)) else _Common._backoff(attempt, None)
        return min(MAX_BACKOFF_S, pause, remaining)


class Client(_Common):
    """Synchronous client. `http` lets tests pass their own httpx.Client (e.g. FastAPI's TestClient)."""

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        http: httpx.Client | None = None,
    ) -> None:
        super().__init__(url, api_key, retries)
        self._http = http or httpx.Client(base_url=self.url, timeout=timeout)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> Any:
        limit: Any = timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT
        for attempt in range(self.retries + 1):
            response = None
            try:
                response = self._http.request(
                    method,
                    path,
                    json=json,
                    params=params,
                    headers={**self.headers, **(headers or {})},
                    timeout=limit,
                )
            except httpx.TransportError:
                if attempt == self.retries:
                    raise
            if response is not None and (response.status_code not in RETRY_STATUSES or attempt == self.retries):
                return self._result(response)
            time.sleep(self._backoff(attempt, response))
        raise AssertionError("unreachable")

    def submit(
        self, task: str, source: str | bytes | Path, *, idempotency_key: str | None = None, **options: Any
    ) -> dict[str, Any]:
        """Submit one candidate; options: dtypes, campaign, gpu_class, metadata. Returns the submission."""
        key = idempotency_key or uuid.uuid4().hex
        body = submission_body(task, source, **options)
        result: dict[str, Any] = self._request("POST", "/v1/submissions", json=body, headers={"Idempotency-Key": key})
        return result

    def submit_batch(self, items: list[dict[str, Any]], *, idempotency_key: str | None = None) -> list[dict[str, Any]]:
        """Items built with `submission_body`; returns per-item results (status, submission or problem)."""
        key = idempotency_key or uuid.uuid4().hex
        result = self._request("POST", "/v1/submissions/batch", json={"items": items}, headers={"Idempotency-Key": key})
        return list(result["results"])

    def get(self, submission_id: str, wait: float | None = None) -> dict[str, Any]:
        params = {"wait": wait} if wait else None
        timeout = (wait + 30.0) if wait else None
        result: dict[str, Any] = self._request(
            "GET", f"/v1/submissions/{submission_id}", params=params, timeout=timeout
        )
        return result

    def wait(self, submission_id: str, timeout: float = 3600.0, poll_s: float = 60.0) -> dict[str, Any]:
        """Long-poll until the submission is final; TimeoutError after `timeout` seconds. An outage of the service
        within the wait is waited out (until the deadline, when its last error is raised)."""
        deadline = time.monotonic() + timeout
        faults = 0
        while True:
            remaining = deadline - time.monotonic()
            try:
                sub = self.get(submission_id, wait=max(0.1, min(poll_s, remaining)))
            except (APIError, httpx.TransportError) as exc:
                pause = self._outage_pause(exc, faults, deadline)
                if pause is None:
                    raise
                faults += 1
                time.sleep(pause)
                continue
            faults = 0
            if is_final(sub):
                return sub
            if time.monotonic() >= deadline:
                raise TimeoutError(f"submission {submission_id} is still {sub.get('state')} after {timeout:.0f} s")

    def report(self, submission_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._request("GET", f"/v1/submissions/{submission_id}/report")
        return result

    def report_markdown(self, submission_id: str) -> str:
        return str(self._request("GET", f"/v1/submissions/{submission_id}/report.md"))

    def list_submissions(self, **filters: Any) -> Iterator[dict[str, Any]]:
        """Every submission matching the filters, newest first, following cursors."""
        params = {k: v for k, v in filters.items() if v is not None}
        while True:
            page = self._request("GET", "/v1/submissions", params=params)
            yield from page["items"]
            if not page["next_cursor"]:
                return
            params["cursor"] = page["next_cursor"]

    def tasks(self) -> list[dict[str, Any]]:
        return list(self._request("GET", "/v1/tasks"))

    def leaderboard(self, **filters: Any) -> list[dict[str, Any]]:
        params = {k: v for k, v in filters.items() if v is not None}
        return list(self._request("GET", "/v1/leaderboard", params=params)["entries"])


class AsyncClient(_Common):
    """Asynchronous client with the same methods as `Client`, awaited."""

    def __init__(
        self,
        url: str | None = None,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        retries: int = 3,
        http: httpx.AsyncClient | None = None,
    ) -> None:
        super().__init__(url, api_key, retries)
        self._http = http or httpx.AsyncClient(base_url=self.url, timeout=timeout)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    async def _request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        timeout: float | None = None,
    ) -> Any:
        limit: Any = timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT
        for attempt in range(self.retries + 1):
            response = None
            try:
                response = await self._http.request(
                    method,
                    path,
                    json=json,
                    params=params,
                    headers={**self.headers, **(headers or {})},
                    timeout=limit,
                )
            except httpx.TransportError:
                if attempt == self.retries:
                    raise
            if response is not None and (response.status_code not in RETRY_STATUSES or attempt == self.retries):
                return self._result(response)
            await asyncio.sleep(self._backoff(attempt, response))
        raise AssertionError("unreachable")

    async def submit(
        self, task: str, source: str | bytes | Path, *, idempotency_key: str | None = None, **options: Any
    ) -> dict[str, Any]:
        key = idempotency_key or uuid.uuid4().hex
        result: dict[str, Any] = await self._request(
            "POST",
            "/v1/submissions",
            json=submission_body(task, source, **options),
            headers={"Idempotency-Key": key},
        )
        return result

    async def submit_batch(
        self, items: list[dict[str, Any]], *, idempotency_key: str | None = None
    ) -> list[dict[str, Any]]:
        key = idempotency_key or uuid.uuid4().hex
        result = await self._request(
            "POST", "/v1/submissions/batch", json={"items": items}, headers={"Idempotency-Key": key}
        )
        return list(result["results"])

    async def get(self, submission_id: str, wait: float | None = None) -> dict[str, Any]:
        params = {"wait": wait} if wait else None
        timeout = (wait + 30.0) if wait else None
        result: dict[str, Any] = await self._request(
            "GET", f"/v1/submissions/{submission_id}", params=params, timeout=timeout
        )
        return result

    async def wait(self, submission_id: str, timeout: float = 3600.0, poll_s: float = 60.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        faults = 0
        while True:
            remaining = deadline - time.monotonic()
            try:
                sub = await self.get(submission_id, wait=max(0.1, min(poll_s, remaining)))
            except (APIError, httpx.TransportError) as exc:
                pause = self._outage_pause(exc, faults, deadline)
                if pause is None:
                    raise
                faults += 1
                await asyncio.sleep(pause)
                continue
            faults = 0
            if is_final(sub):
                return sub
            if time.monotonic() >= deadline:
                raise TimeoutError(f"submission {submission_id} is still {sub.get('state')} after {timeout:.0f} s")

    async def report(self, submission_id: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._request("GET", f"/v1/submissions/{submission_id}/report")
        return result

    async def report_markdown(self, submission_id: str) -> str:
        return str(await self._request("GET", f"/v1/submissions/{submission_id}/report.md"))

    async def list_submissions(self, **filters: Any) -> AsyncIterator[dict[str, Any]]:
        params = {k: v for k, v in filters.items() if v is not None}
        while True:
            page = await self._request("GET", "/v1/submissions", params=params)
            for item in page["items"]:
                yield item
            if not page["next_cursor"]:
                return
            params["cursor"] = page["next_cursor"]

    async def tasks(self) -> list[dict[str, Any]]:
        return list(await self._request("GET", "/v1/tasks"))

    async def leaderboard(self, **filters: Any) -> list[dict[str, Any]]:
        params = {k: v for k, v in filters.items() if v is not None}
        return list((await self._request("GET", "/v1/leaderboard", params=params))["entries"])
