"""Cassettes: recorded or authored judge answers, their keys, index, writer, authoring."""
