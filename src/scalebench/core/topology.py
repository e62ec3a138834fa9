"""Choosing which free GPUs a cell gets: the best-connected set (topology given) or the most
contiguous ids (none given). Link names follow `nvidia-smi topo -m`."""
from __future__ import annotations

import itertools
import re

# Lower is better. NV<k>: NVLink with k links (more links, a little better).
LINK_COST = {"PIX": 20.0, "PXB": 30.0, "PHB": 40.0, "NODE": 50.0, "SYS": 60.0}
UNKNOWN_COST = 60.0


def link_cost(kind: str | None) -> float:
    if not kind:
        return UNKNOWN_COST
    m = re.fullmatch(r"NV(\d+)", kind.strip().upper())
    if m:
        return 10.0 - min(int(m.group(1)), 18) * 0.1
    return LINK_COST.get(kind.strip().upper(), UNKNOWN_COST)


def set_cost(ids: tuple[str, ...], topology: dict[str, dict[str, str]] | None, order: list[str]) -> tuple:
    """Sort key of a candidate set: slowest link first (a ring all-reduce runs at its pace), then
    the sum of links, then contiguity and the lowest ids (deterministic)."""
    pos = [order.index(i) for i in ids]
    contiguity = max(pos) - min(pos) - (len(ids) - 1)
    if topology and len(ids) > 1:
        costs = [link_cost(topology.get(a, {}).get(b) or topology.get(b, {}).get(a)) for a, b in itertools.combinations(ids, 2)]
        return (max(costs), sum(costs), contiguity, pos)
    return (0.0, 0.0, contiguity, pos)


def choose(free: list[str], n: int, topology: dict[str, dict[str, str]] | None, order: list[str],
           avoid: list[str] | None = None) -> list[str] | None:
    """The best n of the free ids, or None when fewer than n are free. A set other than `avoid`
    wins over it when its slowest link is as fast (a rerun checks a figure on other devices, never
    on slower links, which would look like the regression it checks)."""
    if n > len(free):
        return None
    free = sorted(free, key=order.index)
    shunned = set(avoid or ())

    def key(ids):
        cost = set_cost(ids, topology, order)
        return (cost[0], bool(shunned) and set(ids) == shunned, cost)

    return list(min(itertools.combinations(free, n), key=key))
