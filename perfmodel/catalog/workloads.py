"""Serving workloads as data: prompt and response length quantiles, the concurrency a
service wants, its model and dtype (``specs/workloads/*.toml``, a source per figure).

>>> load_workload("contract-review").tokens("prompt")["p50"]
32768
"""

from __future__ import annotations

import functools
import math
import re
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, model_validator

from perfmodel.catalog import registry as _registry
from perfmodel.catalog.fields import NUMBER, Count, within

_frozen = ConfigDict(frozen=True, extra="forbid")
#: A length quantile: above 0, at most 2^40 tokens or characters.
Length = Annotated[float, NUMBER, within(0.0, 2.0**40, open_low=True)]
#: Characters per token of a tokenizer: above 0, at most 1000.
CharsPerToken = Annotated[float, NUMBER, within(0.0, 1e3, open_low=True)]
_QUANTILE = re.compile(r"p(\d{1,2}(?:\.\d+)?)")


class LengthDistribution(BaseModel):
    """Length quantiles (``p50 = 200``), in tokens or characters."""

    model_config = _frozen

    unit: Literal["tokens", "characters"]
    quantiles: dict[str, Length]

    @model_validator(mode="after")
    def _ordered(self) -> LengthDistribution:
        if not self.quantiles:
            raise ValueError("quantiles must not be empty")
        for key in self.quantiles:
            match = _QUANTILE.fullmatch(key)
            if not match or not 0 < float(match.group(1)) < 100:
                raise ValueError(f"quantile key {key!r} must look like 'p50' (0 < p < 100)")
        values = [self.quantiles[k] for k in sorted(self.quantiles, key=lambda k: float(k[1:]))]
        if values != sorted(values):
            raise ValueError(f"quantiles {self.quantiles} must not decrease")
        return self


class Workload(BaseModel):
    """A serving workload: who sends what, how many at once, on which model."""

    model_config = _frozen

    name: str
    aliases: tuple[str, ...] = ()
    description: str = ""
    model: str
    dtype: str = "bf16"
    concurrency: Count
    max_len_tokens: Count
    chars_per_token: CharsPerToken | None = None
    prompt: LengthDistribution
    response: LengthDistribution
    sources: dict[str, str]

    @model_validator(mode="after")
    def _consistent(self) -> Workload:
        chars = "characters" in (self.prompt.unit, self.response.unit)
        if chars and self.chars_per_token is None:
            raise ValueError("lengths in characters need chars_per_token")
        if set(self.prompt.quantiles) != set(self.response.quantiles):
            raise ValueError("prompt and response must give the same quantiles")
        missing = [k for k in ("prompt", "response") if k not in self.sources]
        if missing:
            raise ValueError(f"workload {self.name!r} gives no source for {missing}")
        if max(self.total_tokens().values()) > self.max_len_tokens:
            raise ValueError(f"max_len_tokens={self.max_len_tokens} is below the longest request")
        return self

    def tokens(self, which: Literal["prompt", "response"]) -> dict[str, int]:
        """Quantiles of ``which`` in tokens (characters / chars_per_token, rounded up)."""
        dist = getattr(self, which)
        per = self.chars_per_token if dist.unit == "characters" else 1.0
        ordered = sorted(dist.quantiles, key=lambda k: float(k[1:]))
        return {k: math.ceil(dist.quantiles[k] / per) for k in ordered}

    def total_tokens(self) -> dict[str, int]:
        """Tokens of a whole request at each quantile: prompt + response."""
        prompt, response = self.tokens("prompt"), self.tokens("response")
        return {k: prompt[k] + response[k] for k in prompt}

    def life_tokens(self) -> np.ndarray:
        """Tokens held at every decode step of each quantile's request, pooled: what the
        KV-cache model averages over (so the last page's fill runs through all its values)."""
        prompt, response = self.tokens("prompt"), self.tokens("response")
        return np.concatenate(
            [np.arange(prompt[k], prompt[k] + response[k] + 1, dtype=float) for k in prompt]
        )

    def held_tokens(self) -> dict[str, float]:
        """Tokens a sequence holds, averaged over its decode: prompt + response / 2."""
        prompt, response = self.tokens("prompt"), self.tokens("response")
        return {k: prompt[k] + response[k] / 2 for k in prompt}


@functools.cache
def workload_registry() -> dict[str, Workload]:
    return _registry.build("workloads", Workload, "workload")


def known_workloads() -> list[str]:
    """Canonical names of the shipped workloads."""
    return _registry.names(workload_registry())


def load_workload(workload: str | Path | Workload) -> Workload:
    """A workload by name or alias, or from a path to a TOML file."""
    if isinstance(workload, Workload):
        return workload
    return _registry.lookup(workload, workload_registry(), Workload, "workload")
