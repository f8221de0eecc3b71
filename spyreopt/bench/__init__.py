"""Benchmarks, one module per suite, run by ``spyreopt bench`` and by the scripts in ``benchmarks/``.

* ``spyre``: every built-in workload x backend against the baselines, the bound
  and the simulator;
* ``scaling``: synthetic layer stacks of 10 to 3,000 ops;
* ``minimalloc``: the MiniMalloc challenging instances, with the published times;
* ``iopddl``: the IOPDDL contest instances, scored like the contest.

``report`` holds the rows and their tables; ``data`` finds the external
instances (``--data DIR`` or ``SPYREOPT_DATA``).
"""
