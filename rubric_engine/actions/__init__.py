"""From low scores to action items (docs/actions.md): low rows clustered by the requirement
they leave unmet (``clusters``), ranked and compared with a baseline; rows no rule explains,
their explanations clustered into candidate requirements (``failures``); the renderers
(``render``). ``model``, ``clusters``, ``failures`` and ``render`` are pure; ``run`` reads the
store and ``summary`` asks a model."""
