"""Every `scalebench` command, in the order `scalebench --help` lists them. A new command is a
`Command` in its group's module (or a module of its own) and one line here."""
from scalebench.cli.commands import changes, configs, plan, predict, profile, report, results, store

COMMANDS = [
    configs.CONFIGS,
    configs.STACKS,
    plan.PLAN,
    plan.REHEARSE,
    plan.CELLS,
    results.RESULTS,
    results.HISTORY,
    results.COMPARE,
    predict.PREDICT,
    changes.DIFF,
    changes.BISECT,
    profile.PROFILE,
    report.REPORT,
    store.DATA,
    configs.POOLS,
    store.PRUNE,
    store.REPRO,
    changes.ALERTS,
    store.DB,
]
