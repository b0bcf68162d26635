"""What every part of the server stands on: Prometheus metrics (`metrics`), structured logs
(`logs`), the HTTP guards in front of every route (`http_guards`), the sign-in throttle
(`throttle`), text a database can store (`text`) and the data folders (`folders`). It imports
nothing of the server above it (a contract in pyproject.toml)."""
