"""How `problem.toml` says hidden inputs are drawn: the generator models (`normal`, `uniform`,
`random_bits`) and `Generator`, the tagged union an array spec takes (`normal` when `kind` is left
out); and `StrictModel`, the base of every `problem.toml` model (`graders.problems.spec`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, model_validator


class StrictModel(BaseModel):
    """The base of every `problem.toml` model: an unknown key is an error, and a parsed spec is frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class NormalGenerator(StrictModel):
    """Hidden inputs drawn from N(mean, scale**2)."""

    kind: Literal["normal"] = "normal"
    mean: float = 0.0
    scale: Annotated[float, Field(gt=0)] = 1.0


class UniformGenerator(StrictModel):
    """Hidden inputs drawn uniformly from [low, high)."""

    kind: Literal["uniform"]
    low: float = -1.0
    high: float = 1.0

    @model_validator(mode="after")
    def _ordered(self) -> UniformGenerator:
        if not self.low < self.high:
            raise ValueError(f"uniform generator needs low < high, got low={self.low}, high={self.high}")
        return self


def kind_or(default: str) -> Discriminator:
    """A discriminator that reads `kind`, taking `default` when the field is left out."""

    def kind(value: object) -> str:
        if isinstance(value, dict):
            return str(value.get("kind", default))
        return str(getattr(value, "kind", default))

    return Discriminator(kind)


class RandomBitsGenerator(StrictModel):
    """Hidden inputs of an integer leaf: every bit drawn uniformly (an RNG key's data, `uint32[2]`
    for the default threefry key, as `jax.random.key_data` gives it)."""

    kind: Literal["random_bits"]


Generator = Annotated[
    Annotated[NormalGenerator, Tag("normal")]
    | Annotated[UniformGenerator, Tag("uniform")]
    | Annotated[RandomBitsGenerator, Tag("random_bits")],
    kind_or("normal"),
]
