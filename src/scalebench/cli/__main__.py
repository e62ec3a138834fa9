import sys

from scalebench.cli import main

sys.exit(main())
