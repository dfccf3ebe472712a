"""The engine's terms in one short list, shown at the end of the HTML and Markdown reports so
a reader who did not write the rubric can read them (a product manager, say). Pure."""

from __future__ import annotations

#: (term, meaning), in the order a reader meets them in a report
GLOSSARY: tuple[tuple[str, str], ...] = (
    ("red flag / red line",
     "a critical requirement (a red line) was violated; the row is RED_FLAG whatever its score, "
     "and red flags are counted first and on their own"),
    ("PASS / FAIL", "a scored row passes with no red flag and a final score of at least the pass "
     "score (one below the top of the scale unless set); FAIL is below it"),
    ("JUDGE_ERROR", "the judge gave no valid verdict after its re-asks (or was unreachable); the "
     "row has no score and is outside every average and rate, counted on its own"),
    ("referenceBasis", "the status of every requirement that applies to a row: FOLLOWED, "
     "PARTIAL, VIOLATED or NOT_APPLICABLE, each with its source"),
    ("source", "who decided a status: judge, rule (a deterministic check), default (the judge "
     "listed nothing against it) or backfill (a reported red flag with no rule named)"),
    ("NOT_APPLICABLE", "the data cannot show the requirement (observableInData: false) or it "
     "did not apply; outside every compliance denominator"),
    ("compliance", "followed / (followed + partial + violated) for one requirement, 0–100%"),
    ("violationScore (cap)", "a requirement's cap: when it is VIOLATED the final score is at "
     "most this; the judge's own score is kept beside the final one"),
    ("case-level requirement", "a requirement a row brings itself (expected or negative "
     "behaviour, a rule check), shown by its text; its ID is derived from that text"),
    ("protocol warning", "something the engine corrected or noticed in a judge reply (a "
     "re-cased ID, a re-ask, a requirement of another intent); counted by code"),
)  # fmt: skip
