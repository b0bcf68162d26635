"""Code that reads untrusted StableHLO (the programs a submission exports), in the trusted verifier
process, before any of it runs.

Reading exported StableHLO artifacts: deserialization, the op allowlist, peak live bytes,
backward FLOPs, the provenance of each output and a content digest that ignores debug locations
(`normalized_digest`, the key of the result cache).

Runs in the trusted verifier process on untrusted artifacts, before any of them is executed, so
everything here is bounded and linear in the module's size:

- The module is parsed from its serialized bytecode (`Exported.mlir_module_serialized`, through
  the MLIR bindings that ship with jaxlib 0.10.2) and never printed as text: bytecode uniques
  attributes and locations, so a 1 MB artifact can print as gigabytes. The digest hashes the
  module written back as bytecode, for the same reason.
- Every walk is iterative (explicit stacks, no Python recursion), counts operations as it goes
  and stops at `max_ops`, and refuses region nesting deeper than `max_depth` and call chains
  longer than `max_call_depth`.
- Every value must have a static shape and a known element type; a dynamic (`tensor<?xf32>`) or
  unranked tensor would be counted as zero bytes by a static walk, so it is refused.

Modules: `parse` (bytes to a module), `walker` (the bounded walk), `provenance`, `digest`,
`reader` (`inspect_module`: all of it in one pass), `result` (`ModuleInfo`, `ArtifactError`),
`ops` (the allowlist and bounds).
"""
