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


def test_a_ray_address_where_nothing_answers_is_one_line_within_seconds(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """ray.init retries such an address for minutes (over 5 measured); the probe gives up
    after its timeout."""
    import time

    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        pytest.skip("a Ray is running in this process")
    from runners.backends import ray as ray_backend

    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match=r"^ray-address: nothing answers at 'ray://127.0.0.1:1' within 2 s;"):
        ray_backend._check_answers("ray://127.0.0.1:1", timeout_s=2)
    assert time.perf_counter() - t0 < 30
    monkeypatch.setattr(ray_backend, "PROBE_S", 1.0)
    with pytest.raises(ConfigError, match=r"^ray-address: nothing answers at '127.0.0.1:1' within 1 s"):
        make_backend("ray", data=tmp_path, address="127.0.0.1:1")
    assert not ray.is_initialized()


def test_the_probe_lets_a_live_ray_through(tmp_path: Path) -> None:
    ray = pytest.importorskip("ray")
    if ray.is_initialized():
        pytest.skip("a Ray is running in this process")
    from runners.backends import ray as ray_backend

    ctx = ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    try:
        ray_backend._check_answers(ctx.address_info["gcs_address"])  # no error
    finally:
        ray.shutdown()
