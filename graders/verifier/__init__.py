"""The verifier: its process (`main`, forked from a template), what it runs (`verify`, `evaluate`),
how the trusted side talks to it (`client`, `events`), and the residual report beside a verdict
(`report`)."""
