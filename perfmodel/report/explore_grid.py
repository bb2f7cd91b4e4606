"""The grid of ``perfmodel explore``'s page: the values its controls offer, each a
dimension of the tables :func:`perfmodel.sweep` fills when the page is built.

Standard library only, so ``perfmodel explore --help`` shows these defaults without
importing the model.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Grid:
    """The values the page's controls offer (each a table dimension)."""

    hw: tuple[str, ...] = ()  #: devices (names or aliases); empty: every shipped device
    #: dtypes, each where the device has it (and the device's own where it has none of them)
    dtypes: tuple[str, ...] = ("fp16", "bf16")
    d: tuple[int, ...] = (64, 128)
    heads: tuple[tuple[int, int], ...] = ((1, 1), (32, 8))  #: (h, h_kv) pairs
    batch: tuple[int, ...] = (1,)
    #: the window control: sliding windows in keys before the query (and after it when
    #: not causal; ``predict(window=W)``), None: no window
    windows: tuple[int | None, ...] = (None, 4095)
    #: the mask picker: packed documents of L tokens (``predict(segments=L)``), None: one
    documents: tuple[int | None, ...] = (None, 4096)
    #: the block-mask picker: attention-gym's prefix LM with a bidirectional prefix of P
    #: tokens (``predict(block_mask=costs.masks.PrefixLM(P))``), None: none
    prefixes: tuple[int | None, ...] = (None, 2048)
    steps_per_octave: int = 3
    n_max_log2: int = 20

    def n(self) -> list[int]:
        """The n grid: ``round(2 ** (k / steps))`` from 1 to ``2 ** n_max_log2``."""
        k = self.steps_per_octave
        return sorted({round(2 ** (i / k)) for i in range(self.n_max_log2 * k + 1)})

    def devices(self) -> list[str]:
        from perfmodel.catalog.hardware import known_names, load_hardware

        names = list(self.hw) or known_names()
        return list(dict.fromkeys(load_hardware(h).name for h in names))

    def check(self) -> Grid:
        """The grid, or one PerfmodelError naming the field and value."""
        from perfmodel.errors import PerfmodelError

        for name, values in (("d", self.d), ("batch", self.batch)):
            if not values or any(not isinstance(v, int) or v < 1 for v in values):
                raise PerfmodelError(f"{name}={list(values)!r} must be positive integers")
        for name, masks in (
            ("windows", self.windows),
            ("documents", self.documents),
            ("prefixes", self.prefixes),
        ):
            ok = [
                v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 1)
                for v in masks
            ]
            if not masks or not all(ok) or None not in masks:
                raise PerfmodelError(
                    f"{name}={list(masks)!r} must be positive integers and None (no mask)"
                )
        for h, h_kv in self.heads or [(0, 0)]:
            if h < 1 or h_kv < 1 or h % h_kv:
                raise PerfmodelError(
                    f"heads={list(self.heads)!r} must be (h, h_kv) pairs with h_kv dividing h"
                )
        if not 1 <= self.steps_per_octave <= 64 or not 0 <= self.n_max_log2 <= 24:
            raise PerfmodelError(
                f"steps_per_octave={self.steps_per_octave} must be in 1..64 and "
                f"n_max_log2={self.n_max_log2} in 0..24"
            )
        self.devices()  # an unknown device is refused with the catalog's message
        from perfmodel.vocabulary import BYTES_PER_ELEMENT

        unknown = [t for t in self.dtypes if t not in BYTES_PER_ELEMENT]
        if not self.dtypes or unknown:
            raise PerfmodelError(
                f"dtypes={list(self.dtypes)!r} must be among {', '.join(BYTES_PER_ELEMENT)}"
            )
        return self
