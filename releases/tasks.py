"""Background tasks (django-tasks, database backend: `manage.py run_worker` runs them)."""

from __future__ import annotations

from django_tasks import task


@task()
def assess_release(conversation_id: str, traceparent: str = "") -> str:
    """Run a queued assessment; `traceparent` continues the trace of the request that queued
    it. Returns the run's final status."""
    from releases import runner

    return runner.run_assessment(conversation_id, traceparent)
