"""Fixtures shared by the watermark tests."""

from __future__ import annotations

from typing import Any, Iterator

import pytest


@pytest.fixture(scope="module")
def provider() -> Iterator[Any]:
    """The embedded model behind the hf provider (batches of 4), for the schemes' generation
    tests; one torch thread while it runs (a tiny model: more threads only contend)."""
    import torch

    from evalrun.model.embedded import embedded_model_path
    from evalrun.plugins.providers.hf import HFProvider

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield HFProvider(str(embedded_model_path()), spec="embedded", batch_size=4)
    finally:
        torch.set_num_threads(threads)
