"""The agent's drill-downs: a release's tests, code changes and metric history, read from its
ingested detail for `GET /api/releases/<version>/tests|changes|metrics/<metric>/history`
(`sources.drilldown.api`), bounded and paged, each with its history in the service."""
