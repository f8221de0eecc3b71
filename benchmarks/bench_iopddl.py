"""IOPDDL benchmark: every backend on the ASPLOS 2025 contest instances, scored like the contest. (``spyreopt.bench.iopddl``; ``--help`` lists the options)"""

import sys

from spyreopt.bench.iopddl import main

if __name__ == "__main__":
    sys.exit(main())
