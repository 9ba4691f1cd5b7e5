"""The gate in front of /v1: size caps, content type, API key and rate limit, in that order, before any body
is parsed. It is ASGI middleware (not a FastAPI dependency) because dependencies run after the body is read
and parsed, and an unauthenticated client must not get that far."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.problems import (
    P_BAD_REQUEST,
    P_PAYLOAD_TOO_LARGE,
    P_RATE_LIMITED,
    P_UNAUTHORIZED,
    P_UNSUPPORTED_MEDIA_TYPE,
    ProblemType,
    database_unavailable,
    problem_response,
)
from api.service import ClientIdentity, ServiceState
from kernelproof_core.store import keys
from kernelproof_core.store.session import UNAVAILABLE_ERRORS

BODY_METHODS = {"POST", "PUT", "PATCH"}


def presented_key(headers: Headers) -> str | None:
    auth = headers.get("authorization", "")
    if auth[:7].lower() == "bearer ":
        return auth[7:].strip() or None
    return headers.get("x-api-key") or None


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (media.startswith("application/") and media.endswith("+json"))


class GateMiddleware:
    def __init__(self, app: ASGIApp, service: ServiceState) -> None:
        self.app, self.service = app, service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = self._counting(scope, send)
        if not scope["path"].startswith("/v1"):
            await self.app(scope, receive, send)
            return
        settings = self.service.settings
        headers = Headers(scope=scope)
        cap = settings.api_max_request_bytes

        async def reject(
            ptype: ProblemType, detail: str, extra_headers: dict[str, str] | None = None, **ext: Any
        ) -> None:
            response = problem_response(ptype, detail, scope["path"], headers=extra_headers, **ext)
            await response(scope, receive, send)

        declared = headers.get("content-length")
        if declared is not None and not declared.isdigit():
            return await reject(P_BAD_REQUEST, "Content-Length is not a number")
        if declared is not None and int(declared) > cap:
            return await reject(P_PAYLOAD_TOO_LARGE, f"body is {declared} bytes; the cap is {cap} bytes")
        try:
            client = await self._authenticate(headers)
        except UNAVAILABLE_ERRORS as exc:  # the key cannot be checked: an outage, answered as such (not a 500)
            return await database_unavailable(exc, scope["method"], scope["path"])(scope, receive, send)
        if client is None and settings.api_auth_required:
            return await reject(
                P_UNAUTHORIZED,
                "send an API key as `Authorization: Bearer <key>` or `X-API-Key`",
                {"WWW-Authenticate": 'Bearer realm="kernelproof"'},
            )
        identity = f"key:{client.key_id}" if client and client.key_id is not None else f"ip:{_peer(scope)}"
        limit = (client.rate_limit_per_minute if client else None) or settings.api_rate_limit_per_minute
        retry_after = await run_in_threadpool(self.service.limiter.hit, identity, limit)
        if retry_after is not None:
            return await reject(
                P_RATE_LIMITED,
                f"limit is {limit} requests per minute",
                {"Retry-After": str(int(retry_after))},
                retry_after_s=int(retry_after),
            )
        scope.setdefault("state", {})["client"] = client
        if scope["method"] not in BODY_METHODS:
            await self.app(scope, receive, send)
            return
        if not _is_json(headers.get("content-type", "")):
            return await reject(P_UNSUPPORTED_MEDIA_TYPE, "send the body as application/json")
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return None
            body.extend(message.get("body", b""))
            if len(body) > cap:
                return await reject(P_PAYLOAD_TOO_LARGE, f"body exceeds the cap of {cap} bytes")
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(bytes(body), receive), send)

    async def _authenticate(self, headers: Headers) -> ClientIdentity | None:
        token = presented_key(headers)
        if token is None:
            return None if self.service.settings.api_auth_required else ClientIdentity(None, "anonymous")

        def lookup() -> ClientIdentity | None:
            with self.service.sessions() as session:
                row = keys.authenticate(session, token)
                return None if row is None else ClientIdentity(row.id, row.name, row.rate_limit_per_minute)

        client = await run_in_threadpool(lookup)
        if client is None and not self.service.settings.api_auth_required:
            return ClientIdentity(None, "anonymous")
        return client

    def _counting(self, scope: Scope, send: Send) -> Send:
        counter = self.service.metrics.http_requests

        async def wrapped(message: Message) -> None:
            if message["type"] == "http.response.start":
                counter.labels(scope["method"], str(message["status"])).inc()
            await send(message)

        return wrapped


def _peer(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
