"""Calling the judge: prompts, backends, transport, retry, usage, cache markers, cassettes."""
