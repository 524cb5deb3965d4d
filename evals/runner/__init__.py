"""The evals' seam into `agent/`: the only package on the evals side that imports it.

- `trials.py` runs a suite: every scenario K times, each trial a real agent run, stored and
  evaluated (`run_suite`, `EvalOptions`).
- `store.py` is where a trial's agent writes: write-behind, on one of the run's database
  threads.
- `transcript.py` reads what a trial left behind (the agent's messages and events) into the
  `Transcript` the evaluators score.

This module imports nothing: the evaluators, and through them `evals.models`, import
`transcript.py` while the app loads, and `trials.py` imports the evaluators, so loading the
trial runner here would make that a circular import.
"""
