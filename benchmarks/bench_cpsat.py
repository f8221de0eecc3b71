"""CP-SAT backend on three kinds of instance; prints objective, bound, gap, status, seconds and model size. (``spyreopt.bench.cpsat``; ``--help`` lists the options)"""

import sys

from spyreopt.bench.cpsat import main

if __name__ == "__main__":
    sys.exit(main())
