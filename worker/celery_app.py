"""The Celery application of the GPU workers (`celery -A worker.celery_app worker`, or `kernelproof worker`).

Settings are chosen for long, exclusive GPU jobs; each says why. The Celery process itself never initialises
CUDA: it only claims rows and hands each attempt to its job process (worker.job_process), which inherits the
pinned GPU.
"""

from __future__ import annotations

from celery import Celery
from kombu import Exchange, Queue

from kernelproof_core.settings import Settings, get_settings
from worker.dispatch import queue_name

# Unacked messages are redelivered no sooner than this multiple of the job deadline.
VISIBILITY_FACTOR = 1.25


def _queue(name: str) -> Queue:
    # Each queue on its own direct exchange, keyed by its name: what `send_task(queue=...)` declares on the
    # sending side. A bare Queue(name) would be bound to the default exchange with the default routing key and
    # receive every `.any` message as well.
    return Queue(name, Exchange(name, type="direct"), routing_key=name)


def make_celery(settings: Settings) -> Celery:
    app = Celery("kernelproof", broker=settings.broker_url, include=["worker.tasks"])
    default_queue = queue_name(settings, None)
    queues = [_queue(default_queue)]
    if settings.worker_gpu_class:
        queues.insert(0, _queue(queue_name(settings, settings.worker_gpu_class)))
    app.conf.update(
        # Acknowledge only after the verdict is committed: a worker killed mid-job leaves its message with the
        # broker, which redelivers it (the attempt counter stops a job that keeps killing workers).
        task_acks_late=True,
        # With late acks, a job whose process died from a signal is re-queued, not acked as failed.
        task_reject_on_worker_lost=True,
        # Reserve one message at a time: a job holds its GPU for minutes, and a prefetched message would wait
        # behind it instead of going to an idle GPU.
        worker_prefetch_multiplier=1,
        # One worker per GPU (`kernelproof worker --gpu N`), one job at a time; or, with KERNELPROOF_WORKER_OVERLAP
        # = N, N jobs at once in threads of this process (which only claims and records; the job process runs them
        # under one GPU arbiter, every timed phase exclusive).
        worker_concurrency=settings.worker_overlap,
        worker_pool="solo" if settings.worker_overlap == 1 else "threads",
        broker_transport_options={
            # Redis redelivers unacked messages after this; it must exceed the longest job, or a running
            # job would be handed to a second worker while the first is still on it.
            "visibility_timeout": max(
                settings.celery_visibility_timeout_s, settings.job_deadline_s * VISIBILITY_FACTOR
            ),
            # Every key under one prefix: deployments (and test sessions) sharing a Redis stay apart.
            "global_keyprefix": settings.broker_key_prefix,
        },
        # Verdicts live in the database; a result backend would only duplicate them.
        task_ignore_result=True,
        result_backend=None,
        # JSON only: messages must never be able to carry pickled code.
        task_serializer="json",
        accept_content=["json"],
        # Queues per GPU class; a worker consumes its class's queue and the shared `.any` queue.
        task_default_queue=default_queue,
        task_queues=queues,
        task_create_missing_queues=True,
        # Workers start before Redis in compose; keep retrying instead of exiting.
        broker_connection_retry_on_startup=True,
        # Our logging configuration stays in charge.
        worker_hijack_root_logger=False,
        # No task events: nothing consumes them and they cost a broker round-trip per task.
        worker_send_task_events=False,
    )
    return app


app = make_celery(get_settings())
