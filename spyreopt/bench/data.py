"""Where the external benchmark instances are: an explicit directory, or the ``SPYREOPT_DATA`` variable.

The directory holds ``minimalloc/challenging/*.csv`` and ``iopddl/*.json.gz`` (the
layout of the repository's ``tests/data`` with the small instances, and of a
full download with the production-size ones). An installed package has no such
folder beside it, so nothing here guesses one.
"""

from __future__ import annotations

import os
from pathlib import Path

from spyreopt.errors import FormatError

ENV = "SPYREOPT_DATA"


def data_dir(given: str | os.PathLike | None, *parts: str) -> Path:
    """``given`` (else ``$SPYREOPT_DATA``) joined with ``parts``; a FormatError says how to provide it."""
    root = given if given is not None else os.environ.get(ENV)
    if not root:
        raise FormatError(
            f"benchmark data: no directory given; pass --data DIR or set {ENV}=DIR, where DIR holds "
            f"minimalloc/challenging/*.csv and iopddl/*.json.gz (a clone has the small ones in tests/data)"
        )
    path = Path(root, *parts)
    if not path.is_dir():
        raise FormatError(f"benchmark data: {path} is not a directory")
    return path
