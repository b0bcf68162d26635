"""Persistence: the judge's tables and stores (`db`), database faults (`faults`: what counts as the
database being away, waiting for it, the 503 it becomes) and the schema's migrations (`migrate`,
`migrations/`). Imports nothing of the server above it but what feature tables it migrates."""
