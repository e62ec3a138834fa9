"""Run one probe cell in this process (the 'task process' the orphan drill SIGKILLs)."""
import os
import sys
from pathlib import Path

from tests.support.samples import make_probe

tmp = Path(sys.argv[1])
op, ctx, cell, tree = make_probe(tmp, "echo holding; sleep 600")
os.environ["SCALEBENCH_CONFIG_DIR"] = str(tree)
op.execute(ctx)
