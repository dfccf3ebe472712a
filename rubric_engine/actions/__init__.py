"""From low scores to action items: low rows clustered, ranked and compared with a baseline.

docs/actions.md. Low rows are clustered by the requirement they leave unmet (``clusters``), ranked
and compared with a baseline; rows no rule explains, their explanations clustered into candidate
requirements (``failures``); the renderers (``render``). ``model``, ``clusters``, ``failures`` and
``render`` are pure; ``run`` reads the store and ``summary`` asks a model."""
