"""The process's start-up heap, moved out of the garbage collector's sight.

What a process has loaded once it is ready (Django, the apps, OpenTelemetry, the agent: about
127,000 objects) lives as long as the process, yet every full collection walks all of it: a
pause of about 90 ms on this machine, landing on whichever page or trial allocates when it
falls due (benchmark 5: the p95 of the eval pages was that pause). Frozen, a full collection
walks only what was made since: a few milliseconds.

A process-wide step, so only entry points take it (the ASGI application, `run_worker`,
`run_evals`, the benchmark's driver), once they have loaded what they need.
"""

from __future__ import annotations

import gc


def freeze_startup_heap() -> None:
    gc.collect()
    gc.freeze()
