"""The chapter's exercise 3.1.8 (2): FlashAttention-2 or PagedAttention first?

Prints the decision table for the customer-service chat (~200-character turns) and
the contract-review service (32K-token documents) on an H200, then the KV-cache
arithmetic behind the PagedAttention rows. Run: ``python examples/advise_two_services.py``.
"""

from __future__ import annotations

from perfmodel.analysis.advise import advice_table, advise
from perfmodel.units import si

SERVICES = ("customer-service-chat", "contract-review")


def main(hw: str = "h200") -> None:
    advices = [advise(name, hw) for name in SERVICES]
    print(advice_table(advices))
    print(
        f"{'service':<24} {'scheme':<11} {'reserved/seq':>13} {'used/seq':>10} "
        f"{'waste':>7} {'sequences':>10}"
    )
    for a in advices:
        for alloc in a.kv.values():
            print(
                f"{a.workload:<24} {alloc.scheme:<11} {si(alloc.reserved_bytes_per_seq, 'B'):>13} "
                f"{si(alloc.used_bytes_per_seq, 'B'):>10} {alloc.waste_fraction:>7.1%} "
                f"{alloc.max_concurrency:>10}"
            )


if __name__ == "__main__":
    main()
