"""The judge's answer (pure): verdict model, evidence turns, reply scan, ``parse_reply``."""
