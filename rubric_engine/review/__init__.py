"""Reviewing judge verdicts (issue 13): what a reviewer's answer is, which rows a reviewer is
shown next, and the claims that keep two reviewers off the same row.

:mod:`~rubric_engine.review.answers` and :mod:`~rubric_engine.review.queue` are pure (no I/O,
no clock); :mod:`~rubric_engine.review.claims` is the store edge for claims. Every answer is
written as labels of :mod:`rubric_engine.labels` (the calibration issue's one label type).
"""
