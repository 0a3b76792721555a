"""A bad --ray-address is one line (its own module: the Ray other backend tests keep up
for their module would be used instead of the address)."""

from __future__ import annotations

from pathlib import Path

import pytest

from planner.errors import ConfigError
from runners.backends import make_backend


def test_a_ray_address_that_does_not_parse_is_one_line(tmp_path: Path) -> None:
    ray = pytest.importorskip("ray")
    if ray.is_initialized():  # a Ray already up would be used instead of the address
        pytest.skip("a Ray is running in this process")
    with pytest.raises(ConfigError, match=r"^ray-address: cannot connect to 'notanaddress'") as e:
        make_backend("ray", data=tmp_path, address="notanaddress")
    assert "\n" not in str(e.value)
