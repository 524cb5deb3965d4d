"""The risk policy beside the model: plain code that reads a release's data and checks a report.

- `policy`: signals computed from the release data, each with a level by explicit
  thresholds, and the severity they add up to (the floor a filed report may not go below);
  `settings` its thresholds (`PolicySettings`), `signal` a signal and the verdict.
- `history`: a release's past in its service as plain facts (computed by `sources.history`),
  and `history_signals` what the policy reads in it: known-flaky against new failures,
  failures beside changed code, the change's size and authors, the metric judge (`judge`).
- `figures`: numbers as written in text ("4.2%", "0.042", "450 ms") and matching them to data.
- `grounding`: is every figure and claim of a report backed by the release data?
- `instructions`: release text that reads like orders to the assessor.
- `digest`: what the model is shown of a release (the data, the policy's signals, a compact
  form of long change lists).
- `filing`: the decision on a filed report: accepted, refused once with the reasons, or
  stored for a person to review.

Nothing here imports Django: the API (`assessments/report_api.py`, through
`assessments/filing.py`) and the evals (`evals/evaluators/figures.py`) call the same functions.
"""
