"""Prometheus metrics. Queue depth, verdict counts and verification latency are read from the database at
scrape time, so every API replica reports the same numbers whichever worker did the work."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy.orm import Session, sessionmaker

from kernelproof_core.settings import Settings
from kernelproof_core.store import queries
from worker.dispatch import Dispatcher, queue_name

log = logging.getLogger(__name__)
LATENCY_BUCKETS_S = [1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0]


class _StoreCollector(Collector):
    def __init__(self, sessions: sessionmaker[Session], dispatcher: Dispatcher, settings: Settings) -> None:
        self._sessions, self._dispatcher, self._settings = sessions, dispatcher, settings

    def collect(self) -> Iterator[Any]:
        try:
            with self._sessions() as session:
                states = queries.state_counts(session)
                verdicts = queries.verdict_counts(session)
                buckets, count, total = queries.latency_histogram(session, LATENCY_BUCKETS_S)
        except Exception as exc:  # a scrape must not fail because the database blipped
            log.warning("metrics: database unavailable: %s", exc)
            return
        depth = GaugeMetricFamily(
            "kernelproof_queue_depth", "Submissions per state (queued = waiting for a GPU)", labels=["state"]
        )
        for state in ("queued", "running", "finished", "error"):
            depth.add_metric([state], states.get(state, 0))
        yield depth
        verdict_family = CounterMetricFamily(
            "kernelproof_verdicts", "Final verdicts by task", labels=["task", "verdict"]
        )
        for (task, verdict), n in sorted(verdicts.items()):
            verdict_family.add_metric([task, verdict], n)
        yield verdict_family
        hist = HistogramMetricFamily(
            "kernelproof_verification_seconds", "Duration of the attempt that produced each verdict"
        )
        hist.add_metric(
            [],
            [(str(b), c) for b, c in zip(LATENCY_BUCKETS_S, buckets, strict=True)] + [("+Inf", count)],
            sum_value=total,
        )
        yield hist
        broker = GaugeMetricFamily(
            "kernelproof_broker_queue_messages", "Messages waiting in each broker queue", labels=["queue"]
        )
        for gpu_class in [None, *self._settings.gpu_classes]:
            try:
                waiting = self._dispatcher.queue_depth(gpu_class)
            except Exception:
                waiting = None
            if waiting is not None:
                broker.add_metric([queue_name(self._settings, gpu_class)], waiting)
        yield broker


class ServiceMetrics:
    """One registry per app, so several apps in one process (tests) do not collide."""

    def __init__(self, sessions: sessionmaker[Session], dispatcher: Dispatcher, settings: Settings) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(_StoreCollector(sessions, dispatcher, settings))
        self.http_requests = Counter(
            "kernelproof_http_requests",
            "HTTP requests by method and status",
            ["method", "status"],
            registry=self.registry,
        )
        self.submissions = Counter(
            "kernelproof_submissions",
            "Accepted submissions: created, replayed or reused",
            ["outcome"],
            registry=self.registry,
        )

    def render(self) -> bytes:
        return generate_latest(self.registry)
