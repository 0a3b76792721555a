"""World files: every shipped world loads; a malformed one fails with one line naming the key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from planner.errors import ConfigError
from runners.sim.world import list_worlds, load_world

PAPER = Path(__file__).resolve().parents[2] / "configs" / "worlds" / "paper.toml"


def test_shipped_worlds_load_and_cite_sources() -> None:
    worlds = list_worlds()
    assert len(worlds) >= 4, "paper.toml plus at least three more worlds"
    for path in worlds:
        w = load_world(path)
        assert w.sources, f"{path.name} cites no sources"
        assert {"qwen2.5-1.5b", "qwen2.5-7b", "tiny-s"} <= set(w.models)
        assert {"sparse", "prm", "proxy-prm"} <= set(w.rewards)
        assert len(w.sha256) == 64


def test_world_by_name_and_default() -> None:
    assert load_world(None).name == "paper"
    assert load_world("paper").path == str(PAPER)


def _broken(tmp_path: Path, old: str, new: str) -> Path:
    text = PAPER.read_text()
    assert old in text, old
    out = tmp_path / "broken.toml"
    out.write_text(text.replace(old, new, 1))
    return out


@pytest.mark.parametrize(
    ("old", "new", "key"),
    [
        ("native = 0.010", "", "noise.native"),
        ("native = 0.010", 'native = "loud"', "noise.native"),
        ("selection = 0.20", "selection = 1.5", "rewards.sparse.selection"),
        ("selection = 0.20", "selektion = 0.20", "rewards.sparse.selektion"),
        ("base = 0.557, ceiling = 0.744", "base = 0.557, ceiling = 0.5", "models.qwen2.5-1.5b.native.ceiling"),
        ("scale = 1000.0", "scale = -1.0", "models.qwen2.5-1.5b.native.scale"),
        ("stages = 8", "stages = 0", "world.stages"),
        ("[dynamics]", "[dynamix]", "dynamix"),
        # inf * 0 turned every metric into NaN; a typo'd name only showed when a run needed it
        ("prompt_cap = { native = 0.0,", "prompt_cap = { native = inf,", "dynamics.prompt_cap.native"),
        ("scale = 1000.0", "scale = inf", "models.qwen2.5-1.5b.native.scale"),
        ("[rewards.sparse]", "[rewards.spares]", "rewards.spares"),
        # an integer past float range was an OverflowError traceback
        ("scale = 1000.0", "scale = 1" + "0" * 400, "models.qwen2.5-1.5b.native.scale"),
    ],
)
def test_malformed_world_names_the_key(tmp_path: Path, old: str, new: str, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_world(_broken(tmp_path, old, new))
    msg = str(err.value)
    assert "\n" not in msg
    assert repr(key) in msg, msg


def test_not_toml_and_missing_model(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[world\nname = 1")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_world(bad)
    w = load_world(PAPER)
    with pytest.raises(ConfigError, match=re.escape("'models.qwen9-huge'")):
        w.capacity("qwen9-huge", "native")
    with pytest.raises(ConfigError, match="no world file"):
        load_world(tmp_path / "absent.toml")
