"""Dialogue rows: model, shapes, storable checks (pure); readers, spool, repeated rowIds (edges)."""
