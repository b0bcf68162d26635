"""The jail side: code that runs inside the jail's fork server and its children.

Standard library and JAX only: nothing here may import `graders`, `server` or `sandbox` (an
import-linter contract in `make test` checks it), because this package is mounted read-only into
the jail, where only the Python runtime and the virtualenv are visible.
"""
