"""Reviewing judge verdicts: a reviewer's answers, the review queue, claims on rows.

:mod:`~rubric_engine.review.answers` and :mod:`~rubric_engine.review.queue` are pure (no I/O,
no clock); :mod:`~rubric_engine.review.claims` is the store edge for claims. Every answer is
written as labels of :mod:`rubric_engine.labels` (the one label type).
"""
