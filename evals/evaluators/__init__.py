"""The evaluators: what a transcript is worth against its scenario, dimension by dimension.

Each evaluator reads a `Transcript` (evals/runner/transcript.py) and a `Scenario` and returns a
`Score`: a value in 0..1, whether it passed, the named checks behind it and readable details.
`trial.evaluate(scenario, transcript)` runs them all and decides the trial's status;
`trial.aevaluate` adds the optional LLM judge.

- `score.py`: `Check`, `Score`, and the evaluators' interface;
- `matching.py`: key risks, failure statements and forbidden claims found in a text;
- `figures.py`: the figures and claims the data the agent saw does not back;
- `tool_usage.py`, `decision_quality.py`, `error_handling.py`: one deterministic dimension each;
- `judge.py`: the optional LLM judge and the reading of its reply;
- `trial.py`: a whole trial: the scores, then passed, failed or errored.

Dimensions
----------
- **tool_usage**: required tools called, forbidden ones not, the order respected, arguments
  valid (the release asked about, a valid severity, findings present), no second filing, no
  loop on the summary tool. Value: the share of checks that hold.
- **decision_quality** (when the scenario expects a severity): the severity filed (from the
  stored report, the `report_filed` event or the filing call) against the acceptable set; the
  recall of the key risks in the findings and summary; no invented figures and no forbidden
  claims. Value: 0.5 x severity (1 for the preferred severity, 0.75 for another acceptable one,
  0.25 one level off, 0 otherwise) + 0.3 x key-risk recall + 0.2 x (nothing made up, nothing
  the API would flag, none of the policy's evidence left out). It passes when the severity is
  acceptable, every key risk is mentioned and nothing is made up. "Keeps the policy's evidence"
  (`evidence_kept.py`) is critical: a report whose findings (what the model filed, not the
  stored report the API completes) leave out a sentence of the policy's evidence it was shown
  fails the trial. "Names the culprit" (`culprit_named.py`, for a scenario that declares
  `expect.culprit`): the stored report, with what the policy carried into it, names the commit
  that broke the release by a short sha or its subject; it counts as one more key risk.
- **error_handling**: the run completed (no crash, no step limit). For failure scenarios (the
  release does not exist, the summary tool fails): no report filed, the failure stated plainly
  in the final answer, no figures made up. For the others: every tool failure recovered, and a
  report still filed when some data is missing. Value: the share of checks that hold.
- **judge** (optional, off by default): a rubric scored by an injected LLM; see `LLMJudge`.
"""
