"""From expert prose to a pack: the edges of ``rubric init``, ``rubric draft`` and ``--lint``.

docs/authoring.md. The edges of ``rubric init``, ``rubric draft`` and ``rubric validate --lint``
(files, the judge, the store). The pure parts are in :mod:`rubric_engine.rubric` (``criteria``,
``proposal``, ``pack_text``, ``lint``)."""
