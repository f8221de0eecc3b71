"""Builder vs captured Llama-3-8B, side by side: ops by kind, predicted and simulated us, solve s, peak memory.
(``spyreopt.bench.inductor_llama``; ``--help`` lists the options)"""

import sys

from spyreopt.bench.inductor_llama import main

if __name__ == "__main__":
    sys.exit(main())
