"""torch-spyre capture suite: every graph at its reference capacity, half of it and the planning share; the
default method against the capture's answer and an exact backend. (``spyreopt.bench.torch_spyre``; ``--help``)"""

import sys

from spyreopt.bench.torch_spyre import main

if __name__ == "__main__":
    sys.exit(main())
