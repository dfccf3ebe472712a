"""Results where teams already look, and the engine inside their eval tools (docs/integrations.md).

- :mod:`.semconv`: the OpenTelemetry GenAI names we write (event and attributes), in one place.
- :mod:`.events`: a stored row as ``gen_ai.evaluation.result`` events (pure).
- :mod:`.otlp_export`: those events through the OpenTelemetry SDK's OTLP/HTTP exporter
  (``rubric-eval emit --otlp``; extra ``otel``).
- :mod:`.phoenix`: the same results as Phoenix span annotations (``emit --phoenix``; its
  REST API, no extra).
- :mod:`.batching`: gathers the samples a harness scores one by one into one engine run.
- :mod:`.inspect`, :mod:`.deepeval`, :mod:`.promptfoo`: a scorer, a metric and an assertion.

Nothing here is imported by the engine; each module imports its peer on first use.
"""
