"""`scalebench`: the parser built from the commands' declarations, and the run of one command."""
from __future__ import annotations

import argparse
import json
import os
import sys

from scalebench.cli.arguments import Parser, add_command, text
from scalebench.cli.commands import COMMANDS
from scalebench.cli.errors import explain
from scalebench.cli.listing import Listing

DESCRIPTION = ("`scalebench` command line: configs, stacks, plan, rehearse, cells, results, compare, report, data, "
               "pools, db, prune.\n" + """
Listing commands (configs, stacks, plan, rehearse, cells, results, compare, pools) print a table for a person by default
and take `-o json` or `-o csv` for programs; other commands print a sentence or a JSON document.
""")


def parser() -> Parser:
    top = Parser(prog="scalebench", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    top.add_argument("--fleet", type=text, help="fleet YAML (default include/configs/fleet.yaml or $SCALEBENCH_FLEET)")
    sub = top.add_subparsers(dest="cmd", required=True)
    for command in COMMANDS:
        add_command(sub, command)
    top.add_argument("--debug", action="store_true", help="show the traceback of an error (or SCALEBENCH_DEBUG=1)")
    return top


def main(argv: list[str] | None = None) -> int:
    from scalebench.core.config import Configs

    args = parser().parse_args(argv)
    debug = args.debug or os.environ.get("SCALEBENCH_DEBUG", "") not in ("", "0")
    try:
        result = args.command.run(args, Configs(fleet_path=args.fleet))
        if isinstance(result, Listing):
            print(result.render(args.output))
            return result.exit_code
        print(result if isinstance(result, str) else json.dumps(result, indent=2, default=str))
        return 0
    except BaseException as exc:  # the one error path: a line on stderr and an exit status, never a traceback
        if debug or isinstance(exc, SystemExit):
            raise
        line, status = explain(exc, args.cmd)
        if line:
            print(f"scalebench: {line}", file=sys.stderr)
        return status
