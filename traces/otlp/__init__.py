"""OTLP traces read into what Detective keeps of them, in plain Python (no Django): the body
decoded with the `opentelemetry-proto` message classes (`reading`), each span checked and
reduced to the few facts kept (`spans`), an exception's group (`grouping`), and the per-minute
figures and error groups of a request (`aggregate`). The `traces` app stores them."""
