"""Judge calibration against human labels: agreement figures, intervals, records.

Pure statistics (:mod:`binary`, :mod:`intervals`, :mod:`agreement`, :mod:`scores`,
:mod:`correction`), the comparison of a judge with labels (:mod:`compare`), and the stored,
pinned calibration record with its gate metrics (:mod:`record`). "Unmet" (VIOLATED or PARTIAL)
is the positive class throughout. scipy is imported lazily, only when a figure needs it.
"""
