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
    with pytest.raises(ConfigError, match=r"^world: '.*' is a directory, not a world file; give a path"):
        load_world(tmp_path)


# Each range of docs/sim.md's world keys at its edges: (old text, new text, accepted?, key).
# "[" ends are in the range, "(" or ")" ends are not.
Q15N = "base = 0.557, ceiling = 0.744, scale = 1000.0"
EDGES = [
    ("stages = 8", "stages = 1", True, "world.stages"),
    ("stages = 8", "stages = 64", True, "world.stages"),
    ("stages = 8", "stages = 65", False, "world.stages"),
    ("native = 0.010", "native = 0.5", True, "noise.native"),  # [0, 0.5]
    ("native = 0.010", "native = 0.5001", False, "noise.native"),
    ("reuse_decay = { native = 0.55,", "reuse_decay = { native = 0.0,", True, "dynamics.reuse_decay.native"),
    ("reuse_decay = { native = 0.55,", "reuse_decay = { native = -0.01,", False, "dynamics.reuse_decay.native"),
    ("reuse_decay = { native = 0.55,", "reuse_decay = { native = 1.0,", False, "dynamics.reuse_decay.native"),
    ("graded = 0.25", "graded = 1.0", True, "rewards.structured.graded"),  # [0, 1]
    ("graded = 0.25", "graded = 1.0001", False, "rewards.structured.graded"),
    ("selection = 0.20", "selection = 1.0", True, "rewards.sparse.selection"),
    ("selection = 0.20", "selection = 0.0", True, "rewards.sparse.selection"),
    ("selection = 0.20", "selection = 1.0001", False, "rewards.sparse.selection"),
    ("native_lift = 0.10", "native_lift = 0.99", True, "rewards.structured.native_lift"),  # [0, 1)
    ("native_lift = 0.10", "native_lift = 1.0", False, "rewards.structured.native_lift"),
    ("signal = { native = 1.05,", "signal = { native = 100.0,", True, "rewards.structured.signal.native"),
    ("signal = { native = 1.05,", "signal = { native = 0.0,", True, "rewards.structured.signal.native"),
    ("signal = { native = 1.05,", "signal = { native = 100.5,", False, "rewards.structured.signal.native"),
    ("signal = { native = 1.05,", "signal = { native = -0.5,", False, "rewards.structured.signal.native"),
    (Q15N, "base = 0.0, ceiling = 0.744, scale = 1000.0", True, "models.qwen2.5-1.5b.native.base"),  # [0, 1)
    (Q15N, "base = 1.0, ceiling = 1.0, scale = 1000.0", False, "models.qwen2.5-1.5b.native.base"),
    (Q15N, "base = 0.557, ceiling = 0.557, scale = 1000.0", True, "models.qwen2.5-1.5b.native.ceiling"),  # [base, 1]
    (Q15N, "base = 0.557, ceiling = 1.0, scale = 1000.0", True, "models.qwen2.5-1.5b.native.ceiling"),
    (Q15N, "base = 0.557, ceiling = 1.0001, scale = 1000.0", False, "models.qwen2.5-1.5b.native.ceiling"),
    (Q15N, "base = 0.557, ceiling = 0.744, scale = 0.005", True, "models.qwen2.5-1.5b.native.scale"),  # (0, inf)
    (Q15N, "base = 0.557, ceiling = 0.744, scale = 0.0", False, "models.qwen2.5-1.5b.native.scale"),
]


@pytest.mark.parametrize(("old", "new", "ok", "key"), EDGES)
def test_each_range_holds_its_ends(tmp_path: Path, old: str, new: str, ok: bool, key: str) -> None:
    path = _broken(tmp_path, old, new)
    if ok:
        load_world(path)
    else:
        with pytest.raises(ConfigError, match=re.escape(repr(key))):
            load_world(path)


@pytest.mark.parametrize(
    ("old", "new", "key", "why"),
    [
        ('name = "paper"', 'name = ""', "world.name", "non-empty string"),
        ('name = "paper"', "name = 3", "world.name", "non-empty string"),
        ('"Wilhelm & Kao', '3, "Wilhelm & Kao', "world.sources", "list of strings"),
        ("[noise]", "[bogus]\nx = 1\n\n[noise]", "bogus", "unknown top-level key"),
        ("[models.tiny-l]", "[models.tiny-xl]", "models.tiny-xl", "unknown policy"),
        ("reuse_decay = { native = 0.55, pass1 = 0.35, judge = 0.50 }", "reuse_decay = 0.5",
         "dynamics.reuse_decay", "must be a table"),
        ("prompt_cap = { native = 0.0, pass1 = 6.0, judge = 0.0 }", "", "dynamics.prompt_cap", "missing table"),
        # Free text read as str() took any value: a number or a table was written back as text.
        ('description = "Default world: rule rewards favour update-heavy splits (rho* ~0.7), PRMs ~0.45."', "description = 5", "world.description", "must be a string"),
        ('notes = "1/0 answer correctness: ties whenever all completions agree"', "notes = 1", "rewards.sparse.notes", "must be a string"),
        ('notes = "interpolated in log(parameters) between 1.5B and 7B"', 'notes = ["a"]', "models.qwen2.5-3b.notes", "must be a string"),
    ],
)
def test_malformed_world_says_what_is_wrong(tmp_path: Path, old: str, new: str, key: str, why: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_world(_broken(tmp_path, old, new))
    msg = str(err.value)
    assert "\n" not in msg and repr(key) in msg and why in msg, msg


def test_stages_default_to_8_and_a_missing_reward_is_named(tmp_path: Path) -> None:
    assert load_world(_broken(tmp_path, "stages = 8", "")).stages == 8
    assert load_world(_broken(tmp_path, "stages = 8", "stages = 3")).stages == 3
    with pytest.raises(ConfigError, match=re.escape("'rewards.no-such-reward' is missing")):
        load_world(PAPER).reward("no-such-reward")


def test_a_loaded_world_is_read_only_and_still_pickles() -> None:
    """Every load_world call returns the one cached World: a caller writing into its tables
    would change every later run's world under an unchanged hash."""
    import pickle

    w = load_world("paper")
    for table in (w.noise, w.reuse_decay, w.prompt_cap, w.rewards, w.models, w.models["qwen2.5-7b"],
                  w.reward("sparse").signal):
        with pytest.raises(TypeError):
            table[next(iter(table))] = 0.5  # type: ignore[index]
    assert load_world("paper").noise["native"] == w.noise["native"] == dict(w.noise)["native"]
    back = pickle.loads(pickle.dumps(w))  # worlds travel to spawned workers
    assert back == w and back.models["qwen2.5-7b"]["native"] == w.models["qwen2.5-7b"]["native"]
