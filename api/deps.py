"""FastAPI dependencies: the service state, a database session per request, and the caller set by the gate."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import APIKeyHeader, HTTPBearer
from sqlalchemy.orm import Session

from api.service import ClientIdentity, ServiceState

# Declared for the OpenAPI document; the gate middleware enforces them before the body is read.
_bearer = HTTPBearer(auto_error=False, description="Authorization: Bearer <API key>")
_api_key = APIKeyHeader(name="X-API-Key", auto_error=False, description="the API key")


def service(request: Request) -> ServiceState:
    state: ServiceState = request.app.state.service
    return state


def db_session(svc: Annotated[ServiceState, Depends(service)]) -> Iterator[Session]:
    with svc.sessions() as session:
        yield session


def current_client(
    request: Request, _b: Annotated[object, Security(_bearer)], _k: Annotated[object, Security(_api_key)]
) -> ClientIdentity | None:
    client: ClientIdentity | None = getattr(request.state, "client", None)
    return client


ServiceDep = Annotated[ServiceState, Depends(service)]
SessionDep = Annotated[Session, Depends(db_session)]
ClientDep = Annotated[ClientIdentity | None, Depends(current_client)]
