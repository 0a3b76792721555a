"""Hostile input to `runners execute`: one-line error naming the field, exit 2, records untouched."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from planner.compiler import compile_plan
from planner.proposals import MAX_PROPOSALS_BYTES, make_proposal
from planner.registry import list_models, list_rewards
from runners.cli import app
from runners.engines.sim import SimEngine
from runners.store import PilotStore

PROPS = [make_proposal(compile_plan("tiny-s", r, rho, 1e12)) for r, rho in
         [("sparse", 0.7), ("prm", 0.6), ("dense", 0.75)]]
BASE: dict[str, Any] = json.loads(
    json.dumps({"schema_version": 1, "proposals": [p.model_dump(mode="json") for p in PROPS]})
)
RUNNER = CliRunner()
KNOWN = set(list_models(role=None)) | set(list_rewards())


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> PilotStore:
    """A store with real records that no bad invocation may touch."""
    s = PilotStore(tmp_path_factory.mktemp("hostile"))
    eng = SimEngine()
    for p in PROPS:
        s.write(eng.run(p, 0))
    s.write(eng.run(PROPS[0], 1).model_copy(update={"status": "failed", "error": "error: x"}))
    return s


def invoke_bad(store: PilotStore, content: bytes, *extra: str) -> str:
    """Run `runners execute` on ``content``; assert the contract; return the error line."""
    before = store.fingerprint()
    path = store.root.parent / f"{store.root.name}-bad.json"
    path.write_bytes(content)
    res = RUNNER.invoke(app, ["execute", str(path), "--data", str(store.root), "--engine", "sim", *extra])
    assert res.exit_code == 2, (res.exit_code, res.stdout, res.stderr, res.exception)
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert store.fingerprint() == before
    assert len(store.records()) == 3
    return lines[0]


# -- one mutation of a valid file, and the name the error must contain -------------------------

NUMERIC = {  # dotted path under a proposal -> must be > 0 (and finite)
    "budget": "float", "rho": "unit", "plan.budget": "float", "plan.rho_target": "unit",
    "plan.rounds": "int", "plan.total_prompts": "int", "plan.completions_per_prompt": "int",
    "plan.num_iterations": "int", "plan.prompt_len": "int", "plan.flops.total": "nonneg",
    "plan.flops.search": "nonneg", "plan.flops_per_prompt.reward": "nonneg", "plan.beta": "nonneg",
    "plan.lora_rank": "int",
}
REQUIRED = ["id", "model", "reward", "rho", "budget", "plan", "plan.flops", "plan.rounds",
            "plan.beta", "plan.lora_targets", "plan.flops.learning", "plan.flops_per_prompt"]

not_a_number = st.one_of(
    st.text(max_size=8).filter(lambda s: not _parses(s)), st.none(),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)


def _parses(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


def bad_value(kind: str) -> st.SearchStrategy[Any]:
    special = st.sampled_from([math.nan, math.inf, -math.inf])
    if kind == "unit":
        out = st.one_of(st.floats(max_value=0.0), st.floats(min_value=1.0))
    elif kind == "int":
        out = st.one_of(st.integers(max_value=0), st.floats(0.01, 1e6).filter(lambda x: x != int(x)))
    elif kind == "nonneg":
        out = st.floats(max_value=-1e-300, allow_infinity=False) | st.just(-1)
    else:
        out = st.one_of(st.floats(max_value=0.0, allow_nan=False), st.just(0))
    return st.one_of(out, special, not_a_number)


def _get(d: dict, dotted: str) -> tuple[dict, str]:
    *head, last = dotted.split(".")
    for k in head:
        d = d[k]
    return d, last


@st.composite
def malformed(draw: st.DrawFn) -> tuple[bytes, list[str]]:
    """(file bytes, substrings one of which the error must contain)."""
    d = copy.deepcopy(BASE)
    i = draw(st.integers(0, len(d["proposals"]) - 1))
    where = f"proposals.{i}"
    kind = draw(st.sampled_from(
        ["value", "missing", "unknown", "dup", "version", "extra", "id", "notjson", "toplevel", "truncated"]
    ))
    if kind == "value":
        field = draw(st.sampled_from(sorted(NUMERIC)))
        obj, key = _get(d["proposals"][i], field)
        obj[key] = draw(bad_value(NUMERIC[field]))
        return json.dumps(d).encode(), [f"{where}.{field}"]
    if kind == "missing":
        field = draw(st.sampled_from(REQUIRED))
        obj, key = _get(d["proposals"][i], field)
        del obj[key]
        return json.dumps(d).encode(), [f"{where}.{field}"]
    if kind == "unknown":
        field = draw(st.sampled_from(["model", "reward"]))
        d["proposals"][i][field] = draw(st.text(min_size=1, max_size=12).filter(lambda s: s not in KNOWN))
        return json.dumps(d).encode(), [f"{where}.{field}"]
    if kind == "dup":
        n = len(d["proposals"])
        j = (i + 1 + draw(st.integers(0, n - 2))) % n
        d["proposals"][max(i, j)]["id"] = d["proposals"][min(i, j)]["id"]
        return json.dumps(d).encode(), [f"proposals.{max(i, j)}.id"]
    if kind == "version":
        d["schema_version"] = draw(st.one_of(st.integers().filter(lambda v: v != 1), st.text(max_size=4), st.none()))
        return json.dumps(d).encode(), ["schema_version"]
    if kind == "extra":
        field = draw(st.sampled_from(["", "plan.", "plan.flops."]))
        name = "x_" + draw(st.text("abcdefgh", min_size=1, max_size=6))
        obj, _ = _get(d["proposals"][i], field + "x")
        obj[name] = draw(st.integers())
        return json.dumps(d).encode(), [f"{where}.{field}{name}"]
    if kind == "id":
        d["proposals"][i]["id"] = draw(st.one_of(
            st.just(""), st.tuples(st.text(max_size=10), st.sampled_from(" /\\\n\t#?*")).map("".join),
            st.text("ab", min_size=201, max_size=210), st.integers(),
        ))
        return json.dumps(d).encode(), [f"{where}.id"]
    if kind == "notjson":
        raw = draw(st.binary(max_size=200).filter(lambda b: not _is_json(b)))
        return raw, ["JSON"]
    if kind == "toplevel":
        value = draw(st.one_of(st.lists(st.integers(), max_size=3), st.integers(), st.text(max_size=5), st.none()))
        return json.dumps(value).encode(), ["(file)"]
    text = json.dumps(d, indent=2).encode()
    return text[: draw(st.integers(0, len(text) - 2))], ["JSON"]


def _is_json(b: bytes) -> bool:
    try:
        json.loads(b)
        return True
    except ValueError:
        return False


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=malformed())
def test_malformed_proposal_files(store: PilotStore, case: tuple[bytes, list[str]]) -> None:
    content, names = case
    line = invoke_bad(store, content)
    assert any(n in line for n in names), (names, line)


def test_very_large_file_refused_before_reading(store: PilotStore, tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:  # sparse: costs no disk, only its size is looked at
        fh.truncate(MAX_PROPOSALS_BYTES + 1)
    res = RUNNER.invoke(app, ["execute", str(big), "--data", str(store.root)])
    assert res.exit_code == 2 and "byte limit" in res.stderr and len(res.stderr.splitlines()) == 1


def _good(store: PilotStore) -> bytes:
    return json.dumps(BASE).encode()


@pytest.mark.parametrize(
    ("extra", "files", "name"),
    [
        (["--world", "{w}"], {"w": b"not = [toml"}, "world"),
        (["--world", "{w}"], {"w": b"[world]\nname = 3\n"}, "world"),
        (["--world", "/no/such/world.toml"], {}, "world"),
        (["--backend", "slurm", "--backend-config", "{c}"], {"c": b"[slurm]\ntime_min = -5\n"}, "slurm.time_min"),
        (["--backend", "slurm", "--backend-config", "{c}"], {"c": b"[slurm]\nnodes = 2\n"},
         "field 'slurm.nodes' is not a setting of [slurm]; use one of: partition, time_min"),
        (["--backend-config", "{c}"], {"c": b"[local]\nworkers = 2\n"},
         "use one of: devices, max_tasks_per_worker (the number of workers is --workers, a flag)"),
        (["--backend-config", "{c}"], {"c": b"[locl]\n"}, "field 'locl' is not a table of the file; use one of: local, ray, slurm"),
        (["--backend-config", "{c}"], {"c": b"\xff\xfe\x00"}, "backend-config"),
        (["--backend-config", "{c}"], {"c": b"[ray]\naddress = 12\n"}, "ray.address"),
        (["--backend", "mpi"], {}, "backend"),
        # tomllib recurses: an array nested thousands deep was a traceback.
        (["--world", "{w}"], {"w": b"a = " + b"[" * 3000 + b"]" * 3000}, "not a world file (values nested too deeply"),
        (["--backend-config", "{c}"], {"c": b"[local]\nx = " + b"[" * 3000 + b"]" * 3000},
         "not a backend config (values nested too deeply"),
        (["--seeds", "0"], {}, "seeds"),
        (["--workers", "0"], {}, "workers"),
        # A digit too many was an OverflowError traceback from the local backend's worker slots.
        (["--workers", "99999999999999999999999"], {}, "workers: must be 1-10000 (runs in flight at once)"),
        (["--retries", "-1"], {}, "retries"),
        (["--timeout-min", "nan"], {}, "timeout"),
        # Past threading.TIMEOUT_MAX the watchdog thread died with a traceback per run, and
        # limited nothing.
        (["--timeout-min", "1e9"], {}, "timeout-min: at most 525600 minutes (a year), got 1e+09; omit it"),
        (["--device", "tpu"], {}, "device"),
        (["--option", "no-equals"], {}, "option"),
        (["--engine", "nosuch"], {}, "engine"),
        (["--engine", "os.path:nothing"], {}, "engine"),
        (["--option", "bogus=1", "--engine", "trl"], {}, "engine"),
        (["--engine", "json:JSONDecoder"], {}, "engine: 'json:JSONDecoder' is not an engine"),
        (["--engine", "trl", "--world", "flat"], {}, "world: only the sim engine"),
        (["--world", "nowhere"], {}, "world: no world file 'nowhere'; give a path or one of: contrast"),
        (["-o", "world=5"], {}, "option 'world' must be a world file or name"),
        (["--seeds", "abc"], {}, "Invalid value for '--seeds'"),
        (["--world", "noisy", "-o", "world=flat"], {}, "world: --world noisy and -o world=flat disagree"),
        (["--engine", "trl", "-o", "learning_rate=abc"], {}, "option 'learning_rate' must be a positive number"),
        (["--engine", "trl", "-o", "threads=0"], {}, "option 'threads' must be a positive integer"),
        (["--engine", "trl", "-o", "quick=maybe"], {}, "option 'quick' must be true or false"),
        (["--device", "tpu:0"], {}, "device: 'tpu:0' is not cpu, cuda or cuda:N"),
        (["--gpus-per-run", "-1"], {}, "gpus-per-run: must be a non-negative number"),
        # A flag the chosen backend never reads was dropped without a word.
        (["--partition", "gpu"], {}, "partition: only the slurm backend takes it, not 'local'; drop --partition"),
        (["--backend", "ray", "--time-min", "30"], {}, "time-min: only the slurm backend takes it, not 'ray'"),
        (["--ray-address", "auto"], {}, "ray-address: only the ray backend takes it, not 'local'"),
        (["--cpus-per-run", "2"], {}, "cpus-per-run: only the ray and slurm backends take it, not 'local'"),
    ],
)
def test_bad_flags_and_config_files(store: PilotStore, tmp_path: Path, extra: list[str],
                                    files: dict[str, bytes], name: str) -> None:
    paths = {}
    for key, body in files.items():
        paths[key] = tmp_path / f"{key}.toml"
        paths[key].write_bytes(body)
    args = [a.format(**{k: str(v) for k, v in paths.items()}) for a in extra]
    line = invoke_bad(store, _good(store), *args)
    assert name in line, line


def test_data_path_that_is_a_file(store: PilotStore, tmp_path: Path) -> None:
    p = tmp_path / "p.json"
    p.write_bytes(_good(store))
    f = tmp_path / "afile"
    f.write_text("x")
    res = RUNNER.invoke(app, ["execute", str(p), "--data", str(f), "--engine", "sim"])
    assert res.exit_code == 2 and "data" in res.stderr and f.read_text() == "x"
    # Under a file: caught before any run, not as a traceback after all of them.
    res = RUNNER.invoke(app, ["execute", str(p), "--data", str(f / "sub"), "--engine", "sim", "--no-progress"])
    assert res.exit_code == 2 and res.stderr.startswith("error: data: cannot create")
    assert len(res.stderr.splitlines()) == 1 and res.stdout == ""


def _edit(dotted: str, value: Any) -> bytes:
    d = copy.deepcopy(BASE)
    for path in dotted.split(","):
        obj, key = _get(d["proposals"][0], path)
        obj[key] = value
    return json.dumps(d).encode()


@pytest.mark.parametrize(
    ("content", "name"),
    [
        # Each value is valid on its own; together with the rest of the file it is a lie.
        (_edit("budget", 2e12), "'proposals.0': budget 2e+12 disagrees with plan.budget"),
        (_edit("rho", 0.9), "rho 0.9 disagrees with plan.rho_target"),
        (_edit("model,plan.model", "tiny-m"), "proposals.0.plan.flops_per_prompt.search"),
        (_edit("plan.completions_kept", 100), "proposals.0.plan.completions_kept: 100 kept of"),
        (_edit("plan.max_completion_length", 1), "proposals.0.plan.max_completion_length: 1 is below"),
        (_edit("plan.flops.total", 1.0), "proposals.0.plan.flops.total: states 1 FLOPs"),
        (_edit("plan.total_prompts", 7), "proposals.0.plan.rounds"),
        (_edit("plan.num_iterations", 5), "proposals.0.plan.old_logprobs"),
        # Strict types: a hand edit that wrote a number as a string is not coerced.
        (_edit("rho", "0.7"), "proposals.0.rho': Input should be a valid number"),
        (_edit("plan.gradient_checkpointing", "yes"), "proposals.0.plan.gradient_checkpointing"),
        (json.dumps(BASE | {"target_budget": -1}).encode(), "target_budget': Input should be greater than 0"),
    ],
)
def test_contradictory_proposal_files(store: PilotStore, content: bytes, name: str) -> None:
    line = invoke_bad(store, content)
    assert name in line, line
    # A contradiction (not a plain type error) says how to get a consistent file.
    assert "recompile" in line or "Input should be" in line, line


def test_a_changed_plan_under_a_recorded_id_is_refused(store: PilotStore) -> None:
    # PROPS[0] is recorded; its id with another (self-consistent) plan must not pass as done.
    other = make_proposal(compile_plan("tiny-s", "sparse", 0.7, 2e12))
    d = copy.deepcopy(BASE)
    d["proposals"][0] = other.model_copy(update={"id": PROPS[0].id}).model_dump(mode="json")
    line = invoke_bad(store, json.dumps(d).encode())
    assert line.startswith(f"error: proposals: {PROPS[0].id}: ") and "another plan" in line


@pytest.mark.parametrize(("doc", "what"), [
    ({"schema_version": 1, "strategy": "ours", "target": "native", "budget": 1e16, "stop_reason": "confident",
      "settings": []}, "a race's summary (regimes.json)"),
    ({"generated_by": "planner report", "settings": []}, "a report's regime calls"),
    ({"model": "tiny-s", "rho": 0.5}, "a JSON object of other keys ('model', 'rho')"),
    (BASE["proposals"], "a bare list of proposals (what `planner suggest --json` prints, beside the file it "
                        "writes to --out)"),
])
def test_another_kind_of_json_is_named_not_a_proposals_file(store: PilotStore, doc: dict[str, Any] | list[Any],
                                                             what: str) -> None:
    """A race's regimes.json given as the proposals (a slip of the shell's completion) said
    "field 'strategy': Extra inputs are not permitted (+16 more); fix that field"."""
    line = invoke_bad(store, json.dumps(doc).encode())
    assert line == (f"error: proposals: the file is {what} with no 'proposals' list, not a proposals file; "
                    "give the proposals.json that `planner suggest` (or `planner plan --out`) wrote"), line


def test_proposals_path_that_is_a_directory(store: PilotStore, tmp_path: Path) -> None:
    res = RUNNER.invoke(app, ["execute", str(tmp_path), "--data", str(store.root), "--engine", "sim"])
    assert res.exit_code == 2 and "is a directory; give the proposals.json file in it" in res.stderr


def test_nothing_left_to_run_starts_no_backend(store: PilotStore, tmp_path: Path) -> None:
    # Every run is recorded: even a backend that could not start (no SLURM here) is not asked to.
    p = tmp_path / "p.json"
    p.write_bytes(_good(store))
    before = store.fingerprint()
    res = RUNNER.invoke(app, ["execute", str(p), "--data", str(store.root), "--engine", "sim",
                              "--backend", "slurm", "--no-progress"])
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("0 ok, 0 failed, 3 already done") and store.fingerprint() == before
