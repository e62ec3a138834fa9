"""The `scalebench` command line: one module per command group in `commands/` (each command and
its arguments declared as data beside it), the list of commands in `commands/__init__.py`, the
parser and the run in `main`, the argument types in `arguments`, the listings' output in
`listing`, the one error path in `errors`."""
from scalebench.cli.main import main

__all__ = ["main"]
