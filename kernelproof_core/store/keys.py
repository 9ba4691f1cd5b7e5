"""API keys: random tokens shown once at creation; only their SHA-256 is stored.

A plain hash (no salt, no KDF) is right here: keys are 256-bit random tokens, so there is nothing to
brute-force, and lookup by hash must be a single indexed query on every request.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from kernelproof_core.store.models import ApiKey
from kernelproof_core.store.types import utcnow

KEY_PREFIX = "kp_"
SHOWN_PREFIX_CHARS = 10


@dataclass(frozen=True, slots=True)
class NewKey:
    id: int
    name: str
    prefix: str
    plaintext: str


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def create_key(session: Session, name: str, rate_limit_per_minute: int | None = None) -> NewKey:
    plaintext = KEY_PREFIX + secrets.token_urlsafe(32)
    row = ApiKey(
        name=name,
        prefix=plaintext[:SHOWN_PREFIX_CHARS],
        key_hash=hash_key(plaintext),
        rate_limit_per_minute=rate_limit_per_minute,
        created_at=utcnow(),
    )
    session.add(row)
    session.commit()
    return NewKey(id=row.id, name=row.name, prefix=row.prefix, plaintext=plaintext)


def authenticate(session: Session, presented: str) -> ApiKey | None:
    """The active key matching `presented`, or None."""
    if not presented.startswith(KEY_PREFIX) or len(presented) > 200:
        return None
    row = session.scalar(select(ApiKey).where(ApiKey.key_hash == hash_key(presented)))
    if row is None or row.revoked_at is not None:
        return None
    return row


def list_keys(session: Session) -> list[ApiKey]:
    return list(session.scalars(select(ApiKey).order_by(ApiKey.id)))


def revoke_key(session: Session, prefix: str) -> int:
    """Revoke every active key whose shown prefix is `prefix`; returns how many were revoked."""
    result = session.execute(
        update(ApiKey).where(ApiKey.prefix == prefix, ApiKey.revoked_at.is_(None)).values(revoked_at=utcnow())
    )
    session.commit()
    return int(result.rowcount)  # type: ignore[attr-defined]


def count_active(session: Session) -> int:
    return int(session.scalar(select(func.count()).select_from(ApiKey).where(ApiKey.revoked_at.is_(None))) or 0)
