"""What every part of the server stands on: Prometheus metrics (`metrics`), structured logs
(`logs`), the HTTP guards in front of every route (`http_guards`), the HTTP status of each
refusal (`http_refusals`), text a database can store (`text`) and the data folders (`folders`)."""
