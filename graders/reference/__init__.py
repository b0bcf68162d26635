"""The reference solution's side: building its expectations (`build`), its self-checks
(`self_checks`, `failures`), and the expectations and their cache files (`expectation`,
`expectation_files`)."""
