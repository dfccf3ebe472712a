"""JSON and YAML as the project reads them: canonical JSON, strict JSON Lines, safe YAML."""
