"""The solve wing: every plan ``spyreopt.solve`` returns is made on one path.

- ``entry``: ``solve``, the one public entry; reads the options once (``Request``: restriction, cache,
  decomposition, method) and routes them.
- ``pipeline``: build -> backend -> decode -> validate for one problem and one backend; ``finish`` and
  ``check_plan`` are the only places in the package that decode and validate a plan.
- ``auto``, ``stages``, ``auto_layers``: ``backend="auto"``, its stages and their budgets.
- ``segments``, ``layers``: the one layer decomposition (split, key, deduplicate, plan once, stitch), used by
  ``auto`` and by ``decompose="layers"``; ``cached``: one problem behind a plan cache.
- ``fixed``: plans of chosen decisions (cost-model fitting and tests), checked by the same ``finish``.

Named ``solving`` rather than ``solve``: a subpackage ``spyreopt.solve`` would be bound over the public
function ``spyreopt.solve`` the first time it is imported.
"""
