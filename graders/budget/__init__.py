"""Budget problems: the least recomputation any checkpoint policy reaches within a memory budget
(docs/ARCHITECTURE.md, "Budget problems")."""
