"""Eval cases in the seeds' shapes, mapped to dialogue rows.

* seed 000 (:mod:`.seed000`): the general eval-case schema, YAML or JSONL, with the agent's
  run (``messages`` or ``output``) alongside;
* seed 004 (:mod:`.seed004`): ``{id, category, input, expected, metadata}`` rows for RAG and
  agent tasks, plus ``output`` / ``trace``;
* seed 001 (:mod:`.diagnosis`): diagnosis cases whose run is a trace fixture file.

Each maps one decoded object to a plain row object for
:func:`rubric_engine.dialogue.shapes.row_from_object`; all but the fixture loading are pure.
"""
