"""The CI client: plain Python (httpx, no Django) that a pipeline runs to send a release's
git range, JUnit XML and metrics to Detective and to read its verdict back.

`records` are the typed shapes that travel (commits and their files), `git` reads a range of a
local checkout into them, `conventional` classifies a commit message, `api` speaks the HTTP
contract and `cli` is `python -m detective_client`.
"""

__version__ = "1.0.0"  # also in pyproject.toml: a test checks they agree
