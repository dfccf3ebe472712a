"""Does a rules-only grade of tau-bench (v1) trajectories agree with the recorded reward?

Reads a tau-bench trajectory file the way ``rubric-eval score FILE --judge none`` does (the
adapter turns each task's expected actions into an ``expectedActions`` check and its outputs
into ``expectedOutputs``), runs the checks, and compares pass/fail with ``reward == 1``.

The reward of a task *without* ``outputs`` depends only on the final database (its actions);
those are the runs the agreement figure is about. Runs of tasks *with* outputs are listed
apart: this copy of tau-bench grades them on the outputs alone.

``--variants`` also grades the action-only runs with stricter versions of the
``expectedActions`` check, to show which part of the check each disagreement comes from.

Usage::

    python scripts/taubench_rules_agreement.py PATH/airline_trajectories_gpt-4o_dev.json
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rubric_engine.dialogue.model import DialogueRow
from rubric_engine.dialogue.readers import DialogueSource
from rubric_engine.engine.task import rules_only_rubric
from rubric_engine.results.model import RequirementStatus
from rubric_engine.rules.evaluate import evaluate_check
from rubric_engine.rules.evidence import evidence_from_row
from rubric_engine.rules.model import ToolSequence
from rubric_engine.rules.run import run_rules

VARIANTS = {
    "as shipped (unordered, successful calls, arguments included)": {},
    "exact arguments": {"exact": True},
    "failed calls counted": {"successful_only": False},
    "order matters (strict)": {"mode": "strict"},
}


def _passes(row: DialogueRow) -> bool:
    run = run_rules(rules_only_rubric(), row)
    return all(result.status is not RequirementStatus.VIOLATED for result in run.results.values())


def _variant(check: ToolSequence, exact: bool = False, **changes: object) -> ToolSequence:
    calls = tuple(c.model_copy(update={"arguments_match": "exact"}) for c in check.calls)
    return check.model_copy(update={**changes, **({"calls": calls} if exact else {})})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trajectories", type=Path)
    parser.add_argument("--variants", action="store_true", help="also grade stricter checks")
    args = parser.parse_args()
    source = DialogueSource(args.trajectories)
    source.validate()
    rows = list(source)
    action_only = [r for r in rows if not r.reference_output.get("expectedOutputs")]
    with_outputs = [r for r in rows if r.reference_output.get("expectedOutputs")]
    graded = [r for r in action_only if r.metadata.get("reward") is not None]
    agree = [r for r in graded if _passes(r) == (r.metadata["reward"] == 1.0)]
    print(
        f"runs: {len(rows)}; action-only tasks: {len(action_only)} runs "
        f"({len(graded)} with a reward); tasks with outputs: {len(with_outputs)} runs"
    )
    print(f"action-only agreement: {len(agree)}/{len(graded)}")
    for r in graded:
        if r not in agree:
            print(
                f"  DISAGREE {r.row_id}: reward {r.metadata['reward']}, rules "
                f"{'pass' if _passes(r) else 'fail'}"
            )
    print("tasks with outputs (reward = outputs only in this tau-bench copy):")
    for r in with_outputs:
        run = run_rules(rules_only_rubric(), r)
        states = ", ".join(f"{result.name} {result.status}" for result in run.results.values())
        print(f"  {r.row_id}: reward {r.metadata.get('reward')}; {states}")
    if args.variants:
        print("expectedActions variants on the action-only runs:")
        for label, change in VARIANTS.items():
            wrong = []
            for r in graded:
                check = next(c for c in r.expected if c.label == "expectedActions")
                assert isinstance(check, ToolSequence)
                outcome = evaluate_check(_variant(check, **change), evidence_from_row(r))
                passed = outcome.status is not RequirementStatus.VIOLATED
                if passed != (r.metadata["reward"] == 1.0):
                    wrong.append(f"{r.row_id} ({outcome.detail})")
            print(f"  {label}: {len(graded) - len(wrong)}/{len(graded)}")
            for item in wrong:
                print(f"    {item}")


if __name__ == "__main__":
    main()
