"""planner.registry: the model and reward-system files under configs/, checked as read."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from planner import registry
from planner.cli import app

runner = CliRunner()
CONFIGS = Path(__file__).resolve().parents[2] / "configs"

MODEL = """name = "mine"
role = "policy"
family = "qwen2.5"
hidden_size = 1536
num_hidden_layers = 28
num_attention_heads = 12
num_key_value_heads = 2
intermediate_size = 8960
vocab_size = 151936
tie_word_embeddings = true
"""


@pytest.fixture()
def configs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A copy of configs/ active through RACE_CONFIGS, registry caches cleared around it."""
    root = tmp_path / "configs"
    shutil.copytree(CONFIGS / "models", root / "models")
    shutil.copy(CONFIGS / "rewards.toml", root / "rewards.toml")
    monkeypatch.setenv("RACE_CONFIGS", str(root))
    registry._models.cache_clear()
    registry._rewards.cache_clear()
    yield root
    monkeypatch.delenv("RACE_CONFIGS")
    registry._models.cache_clear()
    registry._rewards.cache_clear()


def test_a_well_formed_model_file_registers(configs: Path) -> None:
    (configs / "models" / "mine.toml").write_text(MODEL)
    res = runner.invoke(app, ["flops", "-m", "mine", "--json"])
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize(("edit", "says"), [
    # Each was a traceback (ZeroDivisionError, TypeError) or a model costed with a bad shape.
    (("num_attention_heads = 12", "num_attention_heads = 0"), "num_attention_heads is 0"),
    (("intermediate_size = 8960", 'intermediate_size = "8960"'), "intermediate_size is '8960'"),
    (("num_key_value_heads = 2", "num_key_value_heads = 5"), "num_key_value_heads 5 does not divide"),
    (("tie_word_embeddings = true", 'tie_word_embeddings = "false"'), "tie_word_embeddings is 'false'"),
    (('role = "policy"', 'role = "polcy"'), "role must be 'policy' or 'prm', got 'polcy'"),
    (("vocab_size = 151936", "vocab_size = 151936\nscore_head = [0]"), "score_head"),
    (("tie_word_embeddings = true", 'tie_word_embeddings = true\n[defaults]\nlm_head_positions = "completions"'),
     "lm_head_positions must be 'completion' or 'all', got 'completions'"),
    (("tie_word_embeddings = true", "tie_word_embeddings = true\n[defaults]\nprompt_len = -5"),
     "defaults.prompt_len must be a positive integer, got -5"),
    (("hidden_size = 1536", "hidden_size = 1536\nhidden_sise = 1536"), "hidden_sise"),
    (("hidden_size = 1536", "hidden_size = = 1"), "mine.toml"),
])
def test_a_malformed_model_file_is_one_line_naming_file_and_key(configs: Path, edit: tuple[str, str],
                                                                  says: str) -> None:
    (configs / "models" / "mine.toml").write_text(MODEL.replace(*edit))
    res = runner.invoke(app, ["flops", "-m", "qwen2.5-1.5b"])
    assert res.exit_code == 2, res.output
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "mine.toml" in res.stderr and says in res.stderr, res.stderr


@pytest.mark.parametrize(("text", "says"), [
    ('[sparse]\nkind = "rules"\n', "kind must be 'rule' or 'prm', got 'rules'"),
    ('[sparse]\ndescription = "x"\n', "kind must be 'rule' or 'prm', got None"),
    ('[prm]\nkind = "prm"\n', "[prm] runs a scorer: give it as scorer = { tiny = ..., \"qwen2.5\" = ... }"),
    ('[prm]\nkind = "prm"\nscorer = { tiny = "no-such-prm" }\n', "scorer 'no-such-prm' is not a model"),
    ("[sparse\n", "rewards.toml"),
])
def test_a_malformed_rewards_file_is_one_line(configs: Path, text: str, says: str) -> None:
    (configs / "rewards.toml").write_text(text)
    res = runner.invoke(app, ["plan", "-m", "tiny-s", "-r", "sparse", "--rho", "0.5", "--budget", "1e12"])
    assert res.exit_code == 2, res.output
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "rewards.toml" in res.stderr and says in res.stderr, res.stderr


def test_every_config_file_ships_inside_the_package() -> None:
    """A non-editable install (`pip install git+...`) has no configs/ beside the package:
    the registry reads planner/configs, a link to configs/ here, and the wheel carries what
    pyproject.toml's package-data patterns match. Every file under configs/ must match one,
    or an installed planner knows no model (as it did before)."""
    import fnmatch
    import tomllib
    from pathlib import Path

    from planner.registry import configs_dir

    root = Path(__file__).resolve().parents[2]
    link = root / "planner" / "configs"
    assert link.is_symlink() and link.resolve() == (root / "configs").resolve()
    assert configs_dir() == (root / "configs").resolve()
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["planner"]
    files = [p.relative_to(root).as_posix() for p in (root / "configs").rglob("*") if p.is_file()]
    assert files
    unshipped = [f for f in files if not any(fnmatch.fnmatch(f, pat) and f.count("/") == pat.count("/")
                                             for pat in patterns)]
    assert unshipped == [], f"add a package-data pattern for {unshipped}"


@pytest.mark.parametrize("where", ["missing", "file", "empty"])
def test_race_configs_that_is_no_configs_folder_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         where: str) -> None:
    # A typo'd or stale RACE_CONFIGS read as a folder with no models: "unknown model
    # 'qwen2.5-7b'; use a policy: " (an empty list), no word of the variable.
    path = tmp_path / "configs"
    if where == "file":
        path.write_text("")
    elif where == "empty":
        path.mkdir()
    monkeypatch.setenv("RACE_CONFIGS", str(path))
    registry._models.cache_clear()
    registry._rewards.cache_clear()
    try:
        res = runner.invoke(app, ["flops", "-m", "qwen2.5-7b", "--json"])
    finally:
        monkeypatch.delenv("RACE_CONFIGS")
        registry._models.cache_clear()
        registry._rewards.cache_clear()
    assert res.exit_code == 2
    assert res.stderr.count("\n") == 1
    assert res.stderr.startswith(f"error: RACE_CONFIGS: {str(path)!r} ")
    assert "unset it" in res.stderr


@pytest.mark.parametrize(("get", "name", "hint"), [
    ("get_model", "qwen2.5-1.5B", "did you mean 'qwen2.5-1.5b'? "),  # a case slip
    ("get_model", "qwen2.5-7c", "did you mean 'qwen2.5-7b'? "),
    ("get_reward", "sprase", "did you mean 'sparse'? "),
    ("get_model", "llama-70b", None),
    ("get_reward", "zzz", None),
])
def test_a_near_miss_name_gets_a_did_you_mean(get: str, name: str, hint: str | None) -> None:
    import planner.registry as registry
    from planner.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        getattr(registry, get)(name)
    text = str(err.value)
    assert "\n" not in text and (f"; {hint}use " in text if hint else "did you mean" not in text), text
