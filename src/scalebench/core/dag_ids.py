"""Every DAG id scalebench makes, written once: the DAG builders, the UI and the report read them
here, so naming a DAG never imports the module that builds it."""
from __future__ import annotations

PREFIX = "scalebench_"
REPORT_DAG_ID = "scalebench_nightly_report"      # the nightly report, run from the benchmarks' Asset
MAINTENANCE_DAG_ID = "scalebench_maintenance"    # prunes old attempt folders and logs
BISECT_DAG_ID = "scalebench_bisect"              # which image build made a benchmark slower
PROBE_DAG_ID = "scalebench_host_probe"           # the host probe's nightly cells on every GPU host
ALLREDUCE_DAG_ID = "scalebench_allreduce"         # each host's all-reduce bus bandwidth (the predictions' sync)
ACCURACY_SUFFIX = "_accuracy"


def benchmark_dag_id(benchmark: str) -> str:
    """A benchmark's nightly DAG."""
    return f"{PREFIX}{benchmark}"


def accuracy_dag_id(benchmark: str) -> str:
    """A benchmark's weekly accuracy DAG."""
    return f"{PREFIX}{benchmark}{ACCURACY_SUFFIX}"


def benchmark_of(dag_id: str) -> str | None:
    """The benchmark whose nightly or weekly DAG this is; None for the other DAGs of ours and for ids
    that are not ours."""
    if not dag_id.startswith(PREFIX) or dag_id in (REPORT_DAG_ID, MAINTENANCE_DAG_ID, BISECT_DAG_ID, PROBE_DAG_ID,
                                                  ALLREDUCE_DAG_ID):
        return None
    return dag_id.removeprefix(PREFIX).removesuffix(ACCURACY_SUFFIX) or None
