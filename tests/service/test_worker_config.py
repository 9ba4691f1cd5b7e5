"""The Celery configuration the GPU workers depend on, and queue routing per GPU class."""

from __future__ import annotations

from kernelproof_core.settings import Settings
from worker.celery_app import make_celery
from worker.dispatch import queue_name


def test_settings_for_long_exclusive_gpu_jobs() -> None:
    conf = make_celery(Settings(job_deadline_s=7200, celery_visibility_timeout_s=60)).conf
    assert conf.task_acks_late and conf.task_reject_on_worker_lost
    assert conf.worker_prefetch_multiplier == 1 and conf.worker_concurrency == 1
    assert conf.broker_transport_options["visibility_timeout"] >= 1.25 * 7200  # above the longest job
    assert conf.accept_content == ["json"] and conf.task_ignore_result


def test_each_gpu_class_queue_has_its_own_binding() -> None:
    settings = Settings(queue_prefix="kp", worker_gpu_class="h200")
    queues = {q.name: q for q in make_celery(settings).conf.task_queues}
    assert set(queues) == {"kp.h200", "kp.any"} == {queue_name(settings, "h200"), queue_name(settings, None)}
    for name, queue in queues.items():
        # Bound like send_task(queue=name) declares it, so `.any` messages never land in a class queue too.
        assert queue.exchange.name == name and queue.routing_key == name


def test_overlap_runs_n_jobs_in_threads_and_needs_the_sandbox() -> None:
    import pytest
    from pydantic import ValidationError

    assert make_celery(Settings()).conf.worker_pool == "solo"
    conf = make_celery(Settings(worker_overlap=3)).conf
    assert conf.worker_concurrency == 3 and conf.worker_pool == "threads" and conf.worker_prefetch_multiplier == 1
    with pytest.raises(ValidationError, match="needs sandbox_enabled"):
        Settings(worker_overlap=2, sandbox_enabled=False)
    with pytest.raises(ValidationError):
        Settings(worker_overlap=0)
