"""MILP backend benchmark: IOPDDL B and G and a 300-node synthetic instance. (``spyreopt.bench.milp``; ``--help`` lists the options)"""

import sys

from spyreopt.bench.milp import main

if __name__ == "__main__":
    sys.exit(main())
