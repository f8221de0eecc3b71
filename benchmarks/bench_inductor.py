"""The Inductor adapter on its example models: what it captures and how the captured graphs plan. (``spyreopt.bench.inductor``; ``--help`` lists the options)"""

import sys

from spyreopt.bench.inductor import main

if __name__ == "__main__":
    sys.exit(main())
