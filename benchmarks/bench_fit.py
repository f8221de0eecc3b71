"""Cost-model fit benchmark: held-out error per op family, and plan ranking against the simulator (``spyreopt.bench.fit``; ``--help`` lists the options)"""

import sys

from spyreopt.bench.fit import main

if __name__ == "__main__":
    sys.exit(main())
