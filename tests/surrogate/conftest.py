"""Keep the GP tests light on the shared 2-core box."""

import pytest


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread() -> None:
    import torch

    torch.set_num_threads(1)
