"""RFC 9457 problem details: every error the API returns, with a stable `type` clients can switch on.

Types are URNs (`urn:kernelproof:problem:<slug>`): stable identifiers that do not depend on where docs are
hosted. docs/API.md lists each one. Nothing escapes as a bare 500: unexpected exceptions become
`internal-error`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from kernelproof_core.store.session import UNAVAILABLE_ERRORS, unavailable_reason

log = logging.getLogger(__name__)

PROBLEM_MEDIA_TYPE = "application/problem+json"
TYPE_PREFIX = "urn:kernelproof:problem:"


@dataclass(frozen=True, slots=True)
class ProblemType:
    slug: str
    status: int
    title: str

    @property
    def uri(self) -> str:
        return TYPE_PREFIX + self.slug


P_MALFORMED_BODY = ProblemType("malformed-body", 400, "The request body is not valid JSON")
P_BAD_REQUEST = ProblemType("bad-request", 400, "The request is malformed")
P_BAD_CURSOR = ProblemType("bad-cursor", 400, "The pagination cursor is not valid")
P_UNAUTHORIZED = ProblemType("unauthorized", 401, "A valid API key is required")
P_NOT_FOUND = ProblemType("not-found", 404, "No such resource")
P_METHOD_NOT_ALLOWED = ProblemType("method-not-allowed", 405, "Method not allowed on this resource")
P_REPORT_NOT_READY = ProblemType("report-not-ready", 409, "The submission has no verdict yet")
P_NO_REPORT = ProblemType("no-report", 404, "The submission ended without a report")
P_PAYLOAD_TOO_LARGE = ProblemType("payload-too-large", 413, "The request body exceeds the size cap")
P_SOURCE_TOO_LARGE = ProblemType("source-too-large", 413, "The candidate source exceeds the size cap")
P_BATCH_TOO_LARGE = ProblemType("batch-too-large", 413, "The batch has too many items")
P_UNSUPPORTED_MEDIA_TYPE = ProblemType("unsupported-media-type", 415, "The request body must be application/json")
P_VALIDATION = ProblemType("validation-error", 422, "The request does not match the schema")
P_UNKNOWN_TASK = ProblemType("unknown-task", 422, "No such verification task")
P_INVALID_CAMPAIGN = ProblemType("invalid-campaign", 422, "The campaign cannot be built for this task")
P_CAMPAIGN_LIMITS = ProblemType("campaign-out-of-limits", 422, "The campaign exceeds the operator's limits")
P_UNKNOWN_GPU_CLASS = ProblemType("unknown-gpu-class", 422, "No workers serve this GPU class")
P_IDEMPOTENCY_REUSED = ProblemType(
    "idempotency-key-reused", 422, "The Idempotency-Key was already used with a different payload"
)
P_RATE_LIMITED = ProblemType("rate-limited", 429, "Too many requests for this API key")
P_INTERNAL = ProblemType("internal-error", 500, "Internal error")
P_NOT_READY = ProblemType("not-ready", 503, "A dependency of the service is unreachable")
P_DATABASE_UNAVAILABLE = ProblemType("database-unavailable", 503, "The database did not answer; retry")

# The database failing to answer (store.session.UNAVAILABLE_ERRORS) is an outage, not a bug: 503 with Retry-After,
# which clients retry (kernelproof_core.client does, and a submit with its Idempotency-Key creates nothing twice),
# instead of `internal-error`, which they must not.
DATABASE_RETRY_AFTER_S = 2
# What the gate in front of every /v1 operation can answer (api.gate): the key and rate checks, and the key lookup's
# database.
GATE_PROBLEMS = (P_UNAUTHORIZED, P_RATE_LIMITED, P_DATABASE_UNAVAILABLE)

ALL_PROBLEM_TYPES = [v for v in list(globals().values()) if isinstance(v, ProblemType)]


class ProblemDetail(BaseModel):
    """RFC 9457 body. Extension members: `errors` (validation), `retry_after_s`, `submission_id`."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(examples=[P_VALIDATION.uri])
    title: str = Field(examples=[P_VALIDATION.title])
    status: int = Field(examples=[422])
    detail: str | None = Field(None, examples=["body.task: Field required"])
    instance: str | None = Field(None, examples=["/v1/submissions"])


class Problem(Exception):
    """Raise anywhere in a request to answer with a problem document."""

    def __init__(
        self,
        ptype: ProblemType,
        detail: str | None = None,
        headers: dict[str, str] | None = None,
        **extensions: Any,
    ) -> None:
        super().__init__(detail or ptype.title)
        self.ptype, self.detail, self.headers, self.extensions = ptype, detail, headers or {}, extensions

    def body(self, instance: str | None) -> dict[str, Any]:
        return problem_body(self.ptype, self.detail, instance, **self.extensions)


def problem_body(ptype: ProblemType, detail: str | None, instance: str | None, **extensions: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"type": ptype.uri, "title": ptype.title, "status": ptype.status}
    if detail:
        body["detail"] = detail
    if instance:
        body["instance"] = instance
    body.update(extensions)
    return body


def problem_response(
    ptype: ProblemType,
    detail: str | None = None,
    instance: str | None = None,
    headers: dict[str, str] | None = None,
    **extensions: Any,
) -> JSONResponse:
    return JSONResponse(
        problem_body(ptype, detail, instance, **extensions),
        status_code=ptype.status,
        headers=headers,
        media_type=PROBLEM_MEDIA_TYPE,
    )


def database_unavailable(exc: Exception, method: str, path: str) -> JSONResponse:
    """The answer to a request the database could not serve (logged without the traceback: an outage is not a
    bug, and a failover would otherwise flood the log)."""
    log.warning("database unavailable on %s %s: %s", method, path, unavailable_reason(exc))
    return problem_response(
        P_DATABASE_UNAVAILABLE,
        f"the database did not answer ({type(exc).__name__}); retry in {DATABASE_RETRY_AFTER_S} s",
        path,
        headers={"Retry-After": str(DATABASE_RETRY_AFTER_S)},
        retry_after_s=DATABASE_RETRY_AFTER_S,
    )


def problem_responses(*types: ProblemType) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries for the problems an operation can return."""
    out: dict[int | str, dict[str, Any]] = {}
    for t in types:
        entry = out.setdefault(
            t.status,
            {"model": ProblemDetail, "description": "", "content": {PROBLEM_MEDIA_TYPE: {"examples": {}}}},
        )
        entry["description"] = "; ".join(filter(None, [entry["description"], t.title]))
        entry["content"][PROBLEM_MEDIA_TYPE]["examples"][t.slug] = {
            "value": problem_body(t, None, None),
            "summary": t.title,
        }
    return out


def validation_errors(errors: Sequence[Any]) -> list[dict[str, Any]]:
    """Pydantic errors as plain JSON (their `ctx` may hold exception objects), at most 50."""
    return [
        {
            "loc": [str(p) for p in e.get("loc", ())],
            "msg": str(e.get("msg", "")),
            "type": str(e.get("type", "")),
        }
        for e in errors
    ][:50]


def install_problem_handlers(app: FastAPI) -> None:
    async def on_problem(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, Problem)
        return JSONResponse(
            exc.body(request.url.path),
            status_code=exc.ptype.status,
            headers=exc.headers,
            media_type=PROBLEM_MEDIA_TYPE,
        )

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errors = validation_errors(exc.errors())
        if any(e["type"] == "json_invalid" for e in errors):
            return problem_response(P_MALFORMED_BODY, errors[0]["msg"], request.url.path)
        detail = "; ".join(f"{'.'.join(e['loc'])}: {e['msg']}" for e in errors[:5])
        return problem_response(P_VALIDATION, detail, request.url.path, errors=errors)

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        # FastAPI answers 400 only when it cannot parse the body (bad encoding, nesting too deep).
        known = {400: P_MALFORMED_BODY, 404: P_NOT_FOUND, 405: P_METHOD_NOT_ALLOWED, 413: P_PAYLOAD_TOO_LARGE}
        ptype = known.get(exc.status_code)
        if ptype is None:
            ptype = ProblemType("http-" + str(exc.status_code), exc.status_code, str(exc.detail))
        headers = dict(exc.headers) if exc.headers else None
        return problem_response(ptype, str(exc.detail), request.url.path, headers=headers)

    async def on_database(request: Request, exc: Exception) -> JSONResponse:
        return database_unavailable(exc, request.method, request.url.path)

    async def on_unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return problem_response(P_INTERNAL, "an unexpected error occurred; it has been logged", request.url.path)

    app.add_exception_handler(Problem, on_problem)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    for error in UNAVAILABLE_ERRORS:
        app.add_exception_handler(error, on_database)
    app.add_exception_handler(Exception, on_unexpected)
