"""Eval cases in the shapes of docs/cases.md, mapped to dialogue rows.

* eval cases (:mod:`.eval_case`): the general eval-case schema, YAML or JSONL, with the
  agent's run (``messages`` or ``output``) alongside;
* RAG/agent rows (:mod:`.rag_agent`): ``{id, category, input, expected, metadata}`` rows for
  RAG and agent tasks, plus ``output`` / ``trace``;
* diagnosis cases (:mod:`.diagnosis`): cases whose run is a trace fixture file.

Each maps one decoded object to a plain row object for
:func:`rubric_engine.dialogue.shapes.row_from_object`; all but the fixture loading are pure.
"""
