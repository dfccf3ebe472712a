"""Claims on rows under review, kept in the task store (docs/review.md: a claim on a row expires
so two reviewers do not label the same row by accident). An edge: it reads the clock and the store.

A claim is (task, row, reviewer, expiry). Opening a row claims it for ``ttl_s`` seconds unless
someone else holds a live claim; answering the row releases it. An expired claim is ignored, so
a reviewer who walks away blocks nobody for long. The ``review_claims`` table is the store's
migration ``m006_review_claims``; these functions take the store's
:class:`~rubric_engine.store.backend.Backend`, so they work on SQLite and PostgreSQL alike.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from rubric_engine.store.backend import Backend

__all__ = ["DEFAULT_CLAIM_TTL_S", "claim_row", "live_claims", "release_claim"]

#: how long an opened row stays reserved for its reviewer, seconds
DEFAULT_CLAIM_TTL_S = 600


def _now() -> datetime:
    return datetime.now(UTC)


def _text(moment: datetime) -> str:
    # microseconds: a claim's expiry compared at whole seconds let a 1 s claim lapse at once
    # (fixed width, so the text compares in time order)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def live_claims(db: Backend, task_id: str) -> dict[str, str]:
    """rowId → reviewer of every unexpired claim of a task."""
    found = db.execute(
        "SELECT row_id, reviewer FROM review_claims WHERE task_id=? AND expires_at>?",
        (task_id, _text(_now())),
    )
    return dict(found.fetchall())


def claim_row(db: Backend, task_id: str, row_id: str, reviewer: str, ttl_s: int) -> str:
    """Claim a row for ``reviewer`` unless another reviewer holds a live claim on it.

    Returns:
        The reviewer who holds the row after the call (``reviewer`` when the claim was taken
        or renewed, else the other holder).
    """
    with db.exclusive("review_claims"):
        now = _now()
        held = db.execute(
            "SELECT reviewer, expires_at FROM review_claims WHERE task_id=? AND row_id=?",
            (task_id, row_id),
        ).fetchone()
        if held is not None and held[0] != reviewer and held[1] > _text(now):
            return str(held[0])
        db.execute(
            "INSERT INTO review_claims (task_id, row_id, reviewer, expires_at) VALUES (?,?,?,?) "
            "ON CONFLICT (task_id, row_id) DO UPDATE SET reviewer=excluded.reviewer, "
            "expires_at=excluded.expires_at",
            (task_id, row_id, reviewer, _text(now + timedelta(seconds=ttl_s))),
        )
    return reviewer


def release_claim(db: Backend, task_id: str, row_id: str, reviewer: str) -> None:
    """Drop ``reviewer``'s claim on a row (after they answered it); others' claims stay."""
    db.execute(
        "DELETE FROM review_claims WHERE task_id=? AND row_id=? AND reviewer=?",
        (task_id, row_id, reviewer),
    )
    db.commit()
