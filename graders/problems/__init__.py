"""Problem packages: `problem.toml`'s models (`spec`, `generators`), loading a package and its files
(`problem`, `package_files`), hidden inputs (`hidden_inputs`), publishing (`publication`),
validating (`validate`) and writing new ones (`scaffold`, `scaffold_frameworks`, `tree_spec`)."""
