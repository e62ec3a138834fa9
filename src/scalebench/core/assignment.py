"""Which GPU host each benchmark runs on, night after night. All cells of a benchmark's runs stay
on one host (like for like, a hardware-matched baseline), and a benchmark keeps its host until
something forces a move: its host left the fleet, its `hosts:` no longer allow it, or its host's
planned night no longer fits the budget, or a GPU host joined the fleet. New and moved
benchmarks go, longest night first, to the allowed host with the most budget left. A host that
joined takes benchmarks off the busiest hosts while that makes the largest host night smaller,
the longest such benchmark first (the fewest moves). The store keeps the assignment and every
move (`settle`), so an unrelated config change moves nothing. Smoke runs are not assigned: they
take the first CPU host.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from scalebench.core.config import Benchmark, ConfigError, Fleet, Host

ASSIGNED_PROFILES = ("nightly", "full")  # the GPU profiles; smoke runs on a CPU host as before


def candidates(bench: Benchmark, fleet: Fleet) -> list[Host]:
    """The GPU hosts this benchmark may run on: enough devices for its largest GPU count, and
    among its `hosts:` when it lists some."""
    need = max(bench.gpu_counts)
    return [h for h in fleet.hosts_of("gpu") if len(h.device_ids) >= need
            and (bench.hosts is None or h.name in bench.hosts)]


@dataclass
class Assignment:
    hosts: dict[str, str]                                   # benchmark -> host
    why: dict[str, str] = field(default_factory=dict)       # benchmark -> "kept", "new" or why it moved
    load: dict[str, float] = field(default_factory=dict)    # host -> planned night minutes

    def host_of(self, benchmark: str) -> str:
        """The benchmark's host; ConfigError naming it when no GPU host fits it."""
        if benchmark not in self.hosts:
            raise ConfigError(f"{benchmark}: {self.why.get(benchmark, 'not assigned to a host')}")
        return self.hosts[benchmark]

    def changed(self, previous: dict[str, str]) -> dict[str, str]:
        return {b: h for b, h in self.hosts.items() if previous.get(b) != h}

    def moves(self, previous: dict[str, str]) -> list[str]:
        """Each benchmark that leaves its stored host, in words ("b: gpu-node-1 -> gpu-node-2 (why)")."""
        return [f"{b}: {previous[b]} -> {h} ({self.why[b]})" for b, h in sorted(self.hosts.items())
                if b in previous and previous[b] != h]


def assign(benchmarks: dict[str, Benchmark], fleet: Fleet, minutes: dict[str, float],
           previous: dict[str, str] | None = None, reserved: float = 0.0) -> Assignment:
    """Each benchmark's host. `minutes`: each benchmark's planned night (cells, repeats and rerun
    reserve); `previous`: the stored assignment; `reserved`: minutes every GPU host spends
    before its benchmarks (the host probe). A benchmark no host fits gets no host, and `why`
    says why (`host_of` refuses it): it harms only itself."""
    previous = previous or {}
    budget = fleet.night_budget_minutes
    allowed = {b: [h.name for h in candidates(bench, fleet)] for b, bench in benchmarks.items()}
    out = Assignment({}, {}, {h.name: reserved for h in fleet.hosts_of("gpu")})
    for b, hosts in sorted(allowed.items()):
        if not hosts:
            out.why[b] = (f"no GPU host fits it (needs {max(benchmarks[b].gpu_counts)} devices"
                          + (f" among hosts {benchmarks[b].hosts}" if benchmarks[b].hosts else "")
                          + f"; GPU hosts: {[(h.name, len(h.device_ids)) for h in fleet.hosts_of('gpu')]})")
    benchmarks = {b: bench for b, bench in benchmarks.items() if allowed[b]}
    for b in sorted(benchmarks):
        was = previous.get(b)
        if was is not None and was in allowed[b]:
            out.hosts[b], out.why[b] = was, "kept"
            out.load[was] += minutes[b]
        elif was is not None:
            out.why[b] = f"moved: {was} " + ("left the fleet" if was not in out.load else "is not among its hosts")
    for host in sorted(out.load):  # a host over budget gives up its longest benchmarks until it fits
        mine = sorted((b for b, h in out.hosts.items() if h == host), key=lambda b: (-minutes[b], b))
        while out.load[host] > budget and len(mine) > 1 and any(len(allowed[b]) > 1 for b in mine):
            b = next(b for b in mine if len(allowed[b]) > 1)
            mine.remove(b)
            del out.hosts[b]
            out.load[host] -= minutes[b]
            out.why[b] = f"moved: {host}'s night exceeded night_budget_minutes {budget:g}"
    for b in sorted((b for b in benchmarks if b not in out.hosts), key=lambda b: (-minutes[b], b)):
        host = min(allowed[b], key=lambda h: (out.load[h] + minutes[b] > budget, out.load[h], h))
        out.hosts[b] = host
        out.load[host] += minutes[b]
        out.why.setdefault(b, "new")
    if previous:
        _rebalance_onto_new_hosts(out, allowed, minutes, joined=sorted(set(out.load) - set(previous.values())))
    return out


def _rebalance_onto_new_hosts(out: Assignment, allowed: dict[str, list[str]], minutes: dict[str, float],
                              joined: list[str]) -> None:
    """Move benchmarks kept on the busiest hosts onto hosts that joined the fleet, one at a time,
    while a move makes the largest host night smaller (the longest such benchmark first)."""
    for new in joined:
        while True:
            src = max(out.load, key=lambda h: (out.load[h], h))
            movable = [b for b, h in out.hosts.items() if h == src and new in allowed[b] and out.why[b] == "kept"]
            best = min(movable, key=lambda b: (max(out.load[src] - minutes[b], out.load[new] + minutes[b]), -minutes[b],
                                               b), default=None)
            if src == new or best is None or max(out.load[src] - minutes[best], out.load[new] + minutes[best]) >= \
                    out.load[src]:
                break
            before = out.load[src]
            out.hosts[best] = new
            out.load[src] -= minutes[best]
            out.load[new] += minutes[best]
            out.why[best] = (f"moved: {new} joined the fleet; the largest host night goes from {before:.0f} to "
                             f"{max(out.load.values()):.0f} min")
