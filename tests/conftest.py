"""Fixtures shared by the test modules."""

import pytest


@pytest.fixture
def fresh_compiler():
    """Each torch.compile test starts from a fresh Dynamo cache and an empty capture list, seeded, and leaves
    none behind (a capture from one test must not reach the next)."""
    import torch

    import spyreopt.integrations.inductor as si

    torch._dynamo.reset()
    si.clear()
    torch.manual_seed(0)
    yield
    torch._dynamo.reset()
    si.clear()
