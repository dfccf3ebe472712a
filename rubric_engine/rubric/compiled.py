"""A task's rubric, compiled once: what every row asks of it, worked out before the first row.

Every row of a task is judged under one snapshot. The row path asks that snapshot the same
questions again and again: which requirements apply to an intent, which requirements carry a
rule check, in what order red flags are listed. :class:`CompiledRubric` answers them from
values worked out once, when the task starts, and is handed down the row path (rule checks,
normalization, the row result). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rubric_engine.rubric.model import EvalRubric, HardRequirement


@dataclass(frozen=True)
class CompiledRubric:
    """One snapshot and the lookups its rows need.

    Attributes:
        rubric: the snapshot itself (score scale, output parsing, questions card).
        applicable_sets: intent key → the pack's requirements that apply to a row of that
            intent: common ones then the intent's, in declaration order
            (``docs/protocol.md``, normalization step 1). Key ``None``: no intent was chosen
            (``--judge none``, a judge error): the common requirements alone.
        checked: the pack's requirements that carry a rule check, in declaration order.
        flag_order: red-flag type → its place in the pack; rows list their flags in this order.
    """

    rubric: EvalRubric
    applicable_sets: Mapping[str | None, tuple[HardRequirement, ...]]
    checked: tuple[HardRequirement, ...]
    flag_order: Mapping[str, int]

    @classmethod
    def of(cls, rubric: EvalRubric) -> CompiledRubric:
        sets: dict[str | None, tuple[HardRequirement, ...]] = {None: rubric.common_requirements}
        for intent in rubric.intents:
            sets[intent.key] = rubric.applicable_requirements(intent.key)
        return cls(
            rubric=rubric,
            applicable_sets=sets,
            checked=tuple(r for r in rubric.requirements_by_id.values() if r.check is not None),
            flag_order={flag: n for n, flag in enumerate(rubric.red_flag_types)},
        )

    def applicable(
        self, intent_key: str | None, case: tuple[HardRequirement, ...] = ()
    ) -> tuple[HardRequirement, ...]:
        """The requirements that apply to a row, in referenceBasis order: the pack's for
        ``intent_key`` (:attr:`applicable_sets`), then the row's case-level ``case``.

        Raises:
            KeyError: ``intent_key`` is not one of the pack's intents.
        """
        pack = self.applicable_sets[intent_key]
        return pack + case if case else pack

    def in_flag_order(self, flags: Iterable[str]) -> tuple[str, ...]:
        """``flags`` sorted as the pack lists them; a type the pack does not list goes last,
        by name."""
        last = len(self.flag_order)
        return tuple(sorted(flags, key=lambda flag: (self.flag_order.get(flag, last), flag)))
