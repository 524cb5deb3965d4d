"""The evals' seam into `agent/`: the only package on the evals side that imports it.

- `trials.py` runs a suite: every scenario K times, each trial a real agent run, stored and
  evaluated (`run_suite`, `EvalOptions`).
- `transcript.py` reads what a trial left behind (the agent's messages and events) into the
  `Transcript` the evaluators score.

This module imports nothing: the evaluators, and through them `evals.models`, import
`transcript.py` while the app loads, and `trials.py` imports the evaluators, so loading the
trial runner here would make that a circular import.
"""
