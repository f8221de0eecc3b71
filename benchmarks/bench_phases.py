"""Wall seconds per phase of a whole-model ``auto`` solve (``spyreopt.bench.phases``; ``--help`` lists the options)"""

import sys

from spyreopt.bench.phases import main

if __name__ == "__main__":
    sys.exit(main())
