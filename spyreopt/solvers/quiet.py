"""Silencing native solver output that ignores its own settings."""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager


@contextmanager
def quiet_stdout():
    """Silence file descriptor 1: HiGHS prints its banner from C++ on creation, whatever output_flag says."""
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)
