"""Revisions of the judge's schema, oldest first (`0001_initial`, `0002_grading_claims`, ...)."""
