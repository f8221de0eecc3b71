"""Anneal backend benchmark: IOPDDL contest instances and a synthetic layer stack. (``spyreopt.bench.anneal``; ``--help`` lists the options)"""

import sys

from spyreopt.bench.anneal import main

if __name__ == "__main__":
    sys.exit(main())
