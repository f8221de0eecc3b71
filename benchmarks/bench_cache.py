"""Plan cache and repeated-layer decomposition on a stack of identical transformer layers. (``spyreopt.bench.cache``; ``--help`` lists the options)"""

import sys

from spyreopt.bench.cache import main

if __name__ == "__main__":
    sys.exit(main())
