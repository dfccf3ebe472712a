"""The one error a row mapper raises for a row it cannot read."""

from __future__ import annotations


class RowShapeError(ValueError):
    """A row's shape cannot be mapped to a dialogue; ``field`` says where."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
