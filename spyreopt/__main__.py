import sys

from spyreopt.cli import main

sys.exit(main())
