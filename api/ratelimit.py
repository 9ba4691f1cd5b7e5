"""Per-key rate limits: fixed one-minute windows.

The embedded service counts in memory; the distributed API counts in Redis so every replica shares one budget.
A Redis outage fails open (logged): verification must not stop because the limiter's store is down.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from typing import Any, Protocol

log = logging.getLogger(__name__)
WINDOW_S = 60


class RateLimiter(Protocol):
    def hit(self, identity: str, limit_per_minute: int) -> float | None:
        """Count one request; None if allowed, else seconds until the window resets (Retry-After)."""


def _window(now: float) -> tuple[int, float]:
    window = int(now // WINDOW_S)
    return window, (window + 1) * WINDOW_S - now


class MemoryRateLimiter:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, tuple[int, int]] = {}

    def hit(self, identity: str, limit_per_minute: int) -> float | None:
        window, remaining = _window(time.time())
        with self._lock:
            if len(self._counts) > 100_000:  # forget past windows
                self._counts = {k: v for k, v in self._counts.items() if v[0] == window}
            seen_window, count = self._counts.get(identity, (window, 0))
            count = count + 1 if seen_window == window else 1
            self._counts[identity] = (window, count)
        return None if count <= limit_per_minute else max(1.0, math.ceil(remaining))


class RedisRateLimiter:
    def __init__(self, url: str, key_prefix: str) -> None:
        import redis

        self._redis: Any = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        self._prefix = key_prefix + "kernelproof:ratelimit:"

    def hit(self, identity: str, limit_per_minute: int) -> float | None:
        window, remaining = _window(time.time())
        key = f"{self._prefix}{identity}:{window}"
        try:
            pipe = self._redis.pipeline()
            pipe.incr(key)
            pipe.expire(key, WINDOW_S * 2)
            count = int(pipe.execute()[0])
        except Exception as exc:
            log.warning("rate limiter unavailable (allowing the request): %s", exc)
            return None
        return None if count <= limit_per_minute else max(1.0, math.ceil(remaining))
