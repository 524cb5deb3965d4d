"""Background tasks (django-tasks, database backend: `manage.py run_worker` runs them)."""

from __future__ import annotations

import uuid

from django_tasks import task

from assessments import runner, services


@task()
def assess_release(conversation_id: str, traceparent: str = "") -> str:
    """Run a queued assessment; `traceparent` continues the trace of the request that queued
    it. Returns the run's final status. Data that arrived while it ran queues the next run
    here (`services.finish_run`)."""
    return runner.run_assessment(conversation_id, traceparent, follow_up=enqueue_assessment)


def enqueue_assessment(conversation_id: uuid.UUID, traceparent: str) -> None:
    """Ask a worker to run a queued run: what Reassess passes to `services.start_assessment`,
    which calls it once the run is committed."""
    result = assess_release.enqueue(str(conversation_id), traceparent)
    services.record_task(conversation_id, str(result.id))
