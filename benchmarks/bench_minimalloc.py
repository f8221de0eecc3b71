"""The ``minimalloc`` suite: MiniMalloc's "challenging" production allocation problems. (``spyreopt.bench.minimalloc``; ``--help`` lists the options)"""

import sys

from spyreopt.bench.minimalloc import main

if __name__ == "__main__":
    sys.exit(main())
