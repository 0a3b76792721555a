"""The ``trl`` engine: a real GRPO + LoRA run with TRL's ``GRPOTrainer`` and peft.

Proposal in (its plan already compiled), ``RunRecord`` out. The plan's knobs map onto TRL:

====================  ==========================================================
plan                  TRL / this engine
====================  ==========================================================
completions_per_prompt  ``num_generations`` (G completions generated per prompt)
completions_kept      K <= G kept per group by max-variance down-sampling
num_iterations        ``num_iterations`` (update passes per rollout batch)
prompts_per_round     prompts per generation batch (one optimizer step per pass)
beta                  ``beta`` (> 0: a reference log-prob forward)
gradient_checkpointing  ``gradient_checkpointing``
lora_*                peft ``LoraConfig`` (rank, alpha, target modules)
budget                :class:`runners.meter.BudgetGuard` -- the run stops, and its last
                      round shrinks, so the *metered* total lands on the budget
====================  ==========================================================

The targets are measured on fixed samples before and after training (``*_base`` and
after). The compute card holds metered FLOPs (search/learning/reward), rho, tokens and
wall time by phase. A crash raises :class:`runners.task.RunFailed` carrying the
partial card; a NaN loss is a crash of kind ``nan``.
"""

from __future__ import annotations

import math
import platform
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from planner.accountant import LoRA
from planner.engine import ProgressFn, is_device
from planner.errors import ConfigError
from planner.registry import get_model, get_reward, scorer_for
from planner.schema import ComputeCard, FlopsSplit, Proposal, RunRecord
from planner.versions import tool_version

__all__ = ["TrlEngine"]

_OPTIONS = {
    "learning_rate": "optimizer learning rate (default 5e-4 tiny, 2e-5 qwen2.5)",
    "policy_path": "folder or Hub id of the base policy (default: tiny-world cache / registry hub_id)",
    "scorer_path": "folder or Hub id of the PRM (default: tiny-world cache / registry hub_id)",
    "dataset": "prompt set for qwen2.5 policies: polaris (default) or gsm8k",
    "data_path": "local JSONL/parquet of the prompt set (default: the Hub)",
    "eval_data": "folder with gsm8k/test.jsonl and math500/test.jsonl for qwen2.5 pass1 (default: the Hub)",
    "eval_samples": "problems per target evaluation (default 256; 64 with quick)",
    "micro_batches": "at least this many micro-batches per generation batch (TRL steps_per_generation): the fewest from it up that split the round evenly, else the most that do; default 1",
    "use_vllm": "generate with vLLM in colocate mode (CUDA, only if vllm is importable)",
    "threads": "torch CPU threads (default: 1 for tiny models on CPU, else unchanged)",
}


# Options that change what a run measures: part of the engine's source, so a store refuses
# runs made with other ones (a rerun with another learning rate is not "already done", and
# scores on 64 evaluation problems do not mix with scores on 256). threads and use_vllm
# change speed and rounding, not the experiment.
_OUTCOME_OPTIONS = ("learning_rate", "policy_path", "scorer_path", "dataset", "data_path", "eval_data",
                    "eval_samples", "micro_batches")


# Options that must be numbers (checked when the engine is built, not as a failed run).
_NUMERIC = {"learning_rate": float, "eval_samples": int, "micro_batches": int, "threads": int}
# And their most: threads=100000 crashed every run (a Rust panic, "can't spawn worker
# thread") and was retried; eval_samples=1e12 built that many problems until memory ran out.
_MOST = {"eval_samples": 100_000, "threads": 1024}


def _check_option_types(opts: dict[str, Any]) -> None:
    for key, kind in _NUMERIC.items():
        if key not in opts:
            continue
        v = opts[key]
        number = isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
        if not (number and v > 0 and (kind is float or float(v).is_integer())):
            what = "a positive number" if kind is float else "a positive integer"
            raise ConfigError(f"engine trl: option {key!r} must be {what}, got {v!r}")
        if key in _MOST and v > _MOST[key]:
            raise ConfigError(f"engine trl: option {key!r} is at most {_MOST[key]:,}, got {v:,}; give a smaller one")
    if "use_vllm" in opts and not isinstance(opts["use_vllm"], bool):
        raise ConfigError(f"engine trl: option 'use_vllm' must be true or false, got {opts['use_vllm']!r}")
    _check_paths(opts)


_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def _check_paths(opts: dict[str, Any]) -> None:
    """A local path that does not exist is a typo: refuse it here, not as a failed run
    (with retries) and Hugging Face's "Repo id must use alphanumeric chars" later."""
    for key, hub in (("policy_path", True), ("scorer_path", True), ("data_path", False), ("eval_data", False)):
        v = opts.get(key)
        if v is None:
            continue
        if not isinstance(v, str | Path) or not str(v):
            raise ConfigError(f"engine trl: option {key!r} must be a path, got {v!r}")
        path = Path(str(v)).expanduser()
        if hub and path.exists() and not path.is_dir():
            # A model loads from a folder; given a file, transformers falls back to the Hub
            # and a run fails after a minute of retried lookups.
            raise ConfigError(f"engine trl: option {key!r}: {str(v)!r} is a file; give the model's folder "
                              "(with its config.json) or a Hub id like Qwen/Qwen2.5-1.5B-Instruct")
        if hub and path.is_dir() and not (path / "config.json").is_file():
            # Both loaders read config.json first: without it a run failed (and was retried)
            # on transformers' "Unrecognized model ... Should have a `model_type` key".
            raise ConfigError(f"engine trl: option {key!r}: {str(v)!r} has no config.json; give the model's "
                              "folder (as save_pretrained writes it) or a Hub id like Qwen/Qwen2.5-1.5B-Instruct")
        if path.exists():
            opts[key] = str(path)  # the loaders take the string as given: "~" would read as a Hub id
            continue
        if hub and _HUB_ID.match(str(v)):
            continue
        also = " or a Hub id like Qwen/Qwen2.5-1.5B-Instruct" if hub else ""
        raise ConfigError(f"engine trl: option {key!r}: no such file or directory {str(v)!r}; "
                          f"pass an existing local path{also}")


def _check_cache_dir(cache_dir: str | Path | None) -> None:
    """The tiny-world cache (``cache_dir``, else ``$RACE_CACHE``) must be a folder: a file
    there failed in pretraining as a bare "p.json: File exists", naming neither."""
    import os

    where, name = (cache_dir, "option 'cache_dir'") if cache_dir is not None else \
        (os.environ.get("RACE_CACHE"), "RACE_CACHE")
    if where and (path := Path(str(where)).expanduser()).exists() and not path.is_dir():
        raise ConfigError(f"engine trl: {name}: {str(where)!r} is a file; give a directory for the model cache")


# Prompt sets a qwen2.5 run may train on; math500 (and every test split) is what pass1 reads.
TRAIN_DATASETS = ("polaris", "gsm8k")


def _check_training_data(opts: dict[str, Any]) -> None:
    """Training on the problems a run is then scored on would inflate pass1 without a word."""
    ds = opts.get("dataset")
    if ds is not None and ds not in TRAIN_DATASETS:
        why = "; math500 is the pass1 evaluation set" if ds == "math500" else ""
        raise ConfigError(f"engine trl: option 'dataset' must be one of {', '.join(TRAIN_DATASETS)}, got {ds!r}{why}")
    dp = opts.get("data_path")
    if dp is not None and Path(str(dp)).is_file() and Path(str(dp)).stem.lower() == "test":
        raise ConfigError(f"engine trl: option 'data_path': {dp} is a test split, which pass1 is scored on; give "
                          "the training split (a train.jsonl, or the folder holding it)")


def _check_data_layout(opts: dict[str, Any]) -> None:
    """What the loaders read out of a data folder (``runners.tasks.load_math``): missing, a run
    loaded the policy (minutes for a 7B) and, for eval_data's math500, generated all of the
    base pass1 on gsm8k before its one-line refusal."""
    from runners.tasks.data import split_file

    def has(folder: Path, split: str) -> bool:
        return split_file(folder, split) is not None

    dp = opts.get("data_path")
    if dp is not None and Path(str(dp)).is_dir() and not has(Path(str(dp)), "train"):
        raise ConfigError(f"engine trl: option 'data_path': {dp} has no train.jsonl, train.parquet or train.json; "
                          "give the training split's file, or the folder holding it")
    ev = opts.get("eval_data")
    if ev is None:
        return
    missing = [f"{name}/test.jsonl" for name in ("gsm8k", "math500") if not has(Path(str(ev)) / name, "test")]
    if missing:
        raise ConfigError(f"engine trl: option 'eval_data': {ev} has no {' or '.join(missing)}; give the folder "
                          "holding gsm8k/test.jsonl and math500/test.jsonl (or .parquet)")


# Options only some runs read: given where none of the settings does, they would be
# recorded (and keep the store apart from default runs) while changing nothing.
_QWEN_ONLY = ("dataset", "data_path", "eval_data")


def _check_options_apply(opts: dict[str, Any], settings: list[tuple[str, str]]) -> None:
    archs = [(get_model(m), r) for m, r in settings]
    if not archs:
        return
    if not any(a.family != "tiny" for a, _ in archs):
        for key in _QWEN_ONLY:
            if key in opts:
                raise ConfigError(f"engine trl: option {key!r} sets the prompts of qwen2.5 policies, and these "
                                  "settings are tiny-world ones (they train and score on the tiny world's task): "
                                  "drop it")
    if "scorer_path" in opts and not any(scorer_for(get_reward(r), a) is not None for a, r in archs):
        rewards = ", ".join(dict.fromkeys(r for _, r in archs))
        raise ConfigError(f"engine trl: option 'scorer_path' replaces a learned scorer (a PRM), and {rewards} "
                          "score by rule: drop it, or race a reward that uses one (prm, proxy-prm)")


class TrlEngine:
    """Real GRPO/LoRA runs. ``device`` cpu|cuda; ``quick`` uses the reduced tiny-world
    pretraining and smaller evaluations (tests); ``cache_dir`` holds pretrained tiny models."""

    name = "trl"
    simulated = False

    def __init__(self, device: str = "cpu", quick: bool = False, cache_dir: str | Path | None = None,
                 **opts: Any) -> None:
        unknown = sorted(set(opts) - set(_OPTIONS))
        if unknown:
            known = ", ".join(sorted([*_OPTIONS, "quick", "cache_dir"]))
            raise ConfigError(f"engine trl: unknown option {unknown[0]!r}; known options: {known}")
        if not isinstance(quick, bool):
            raise ConfigError(f"engine trl: option 'quick' must be true or false, got {quick!r}")
        _check_option_types(opts)
        _check_training_data(opts)
        if not is_device(device):
            raise ConfigError(f"engine trl: device must be cpu, cuda or cuda:N, got {device!r}")
        if cache_dir is not None and not (isinstance(cache_dir, str | Path) and str(cache_dir)):
            raise ConfigError(f"engine trl: option 'cache_dir' must be a folder path, got {cache_dir!r}")
        _check_cache_dir(cache_dir)
        if opts.get("use_vllm"):
            import importlib.util

            if importlib.util.find_spec("vllm") is None:
                raise ConfigError("engine trl: use_vllm needs the vllm package; pip install vllm")
            if device == "cpu":
                raise ConfigError("engine trl: use_vllm needs device=cuda")
        self.device = device
        self.quick = quick
        # Quick runs are a smaller experiment: they must not pass for full ones (planner.engine),
        # nor runs with other outcome options (None when all are defaults: older stores match).
        # An option given at its default is the default run: the store must not refuse the
        # runs made without it (learning_rate's default depends on the model, so it stays).
        self.defaults = {"eval_samples": 64 if quick else 256, "micro_batches": 1, "dataset": "polaris"}
        self.source = {"quick": self.quick,
                       "options": {k: opts[k] for k in _OUTCOME_OPTIONS
                                   if k in opts and not (k in self.defaults and opts[k] == self.defaults[k])} or None}
        self.cache_dir = Path(cache_dir).expanduser() if cache_dir else None
        self.opts = opts

    def check_settings(self, settings: Any) -> None:
        """Options none of ``settings`` ``[(model, reward), ...]`` reads, and data folders
        without the files a run reads: one line, before the store or any pretraining."""
        _check_options_apply(self.opts, list(settings))
        _check_data_layout(self.opts)

    def check_device(self) -> None:
        """Refuse a device this process cannot reach, for a caller whose runs execute here
        (an in-process race): one line before the preparation's minutes of pretraining. Not
        in :meth:`prepare`, which also runs on a submitting host without the nodes' GPUs."""
        _check_device(self.device)

    def prepare(self, settings: Any) -> None:
        """Pretrain (or find cached) the tiny-world policies and PRMs that ``settings``
        ``[(model, reward), ...]`` need, before any run starts: inside a run it would count
        against the run's time limit and wall time, with nothing on screen."""
        import sys

        from runners.tinyworld.pretrain import ensure_policy, ensure_prm, is_cached

        self.check_settings(settings)
        done: set[str] = set()
        for model, reward in settings:
            arch = get_model(model)
            if arch.family != "tiny" and self.device == "cpu" and arch.name not in done:
                print(_cpu_warning(arch, self.opts.get("policy_path")), file=sys.stderr)
                done.add(arch.name)
            if arch.family != "tiny":
                continue
            scorer = scorer_for(get_reward(reward), arch)
            # A given policy_path replaces the policy only: the run still pretrains the PRM
            # it scores with where no scorer_path is given, so it is found or made here.
            needs: list[tuple[str, Callable[..., Path]]] = (
                [] if self.opts.get("policy_path") else [(arch.name, ensure_policy)])
            if scorer is not None and not self.opts.get("scorer_path"):
                needs.append((scorer.name, ensure_prm))
            for name, ensure in needs:
                if name in done:
                    continue
                if not is_cached(name, quick=self.quick, cache_dir=self.cache_dir):
                    print(f"pretraining {name} first ({'quick' if self.quick else 'full'} recipe, once; "
                          "then cached)", file=sys.stderr)
                    ensure(name, quick=self.quick, cache_dir=self.cache_dir)
                done.add(name)

    def start_weights(self, model: str, reward: str) -> dict[str, str | None]:
        """What a run of (``model``, ``reward``) here would start from, under the provenance
        keys its record keeps them: ``policy_weights`` and ``scorer_weights``, each the
        ``sha256:`` of local weights (:func:`runners.grpo.loading.weights_fingerprint`), or
        None where they are not local (a Hub id, a tiny model not pretrained yet, no scorer).
        Nothing is trained or downloaded."""
        from runners.grpo.loading import weights_fingerprint
        from runners.tinyworld.pretrain import cached_path

        try:
            arch = get_model(model)
            scorer = scorer_for(get_reward(reward), arch)
        except ConfigError:  # a store's run of a model or reward no longer in the registry
            return {"policy_weights": None, "scorer_weights": None}

        def fingerprint(option: str, name: str | None) -> str | None:
            path = self.opts.get(option)
            if path is None and name is not None and arch.family == "tiny":
                path = cached_path(name, quick=self.quick, cache_dir=self.cache_dir)
            return weights_fingerprint(str(path)) if path is not None else None

        return {"policy_weights": fingerprint("policy_path", arch.name),
                "scorer_weights": fingerprint("scorer_path", scorer.name) if scorer is not None else None}

    def warm_up(self) -> None:
        """Import torch, transformers, peft and TRL (seconds, once per process) so that
        neither a run's wall time nor its time limit pays for them."""
        import runners.grpo.run
        import runners.grpo.trainer
        import runners.rewards  # noqa: F401

    # ------------------------------------------------------------------ the run

    def run(self, proposal: Proposal, seed: int, progress: ProgressFn | None = None) -> RunRecord:
        self.warm_up()
        _check_device(self.device)
        from runners.grpo.run import RunState, execute_plan

        t0 = time.perf_counter()
        plan = proposal.plan
        arch = get_model(plan.model)
        state = RunState(
            policy=arch,
            lora=LoRA(plan.lora_rank, tuple(plan.lora_targets)),
            scorer=scorer_for(get_reward(plan.reward), arch),
        )
        try:
            metrics, provenance = execute_plan(self, proposal, seed, state, progress)
        except Exception as exc:
            _raise_failed(exc, self._card(state, time.perf_counter() - t0))
        wall = time.perf_counter() - t0
        card = self._card(state, wall)
        return RunRecord.ok(
            proposal,
            seed,
            engine=self.name,
            simulated=False,
            card=card,
            metrics=metrics,
            wall_s=wall,
            provenance={"simulated": False, "engine": self.name, "device": self.device,
                        "target": proposal.target, **self.source, **provenance},
        )

    def _card(self, state: Any, wall: float) -> ComputeCard:
        b = state.meter.breakdown()
        walls = {k: round(v, 4) for k, v in state.meter.wall.items()}
        walls["eval"] = round(state.eval_wall, 4)
        walls["total"] = round(wall, 4)
        return ComputeCard(
            flops=FlopsSplit(**b.as_dict()),
            rho=b.rho,
            tokens=dict(state.meter.tokens),
            wall_s=walls,
            hardware=_hardware(self.device),
            software=_software(),
            passes=dict(state.meter.passes),
            rounds=list(state.rounds),
            stop_reason=state.stop_reason,
            planned=state.planned,
        )


def _check_device(device: str) -> None:
    """Where the run executes (a worker, a SLURM node): a CUDA device torch cannot reach is
    bad input, the same for every run -- one line and a stop, not failed runs retried (and a
    race that goes on fitting nothing)."""
    if not device.startswith("cuda"):
        return
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    index = int(device.partition(":")[2] or 0)
    if index >= count:
        seen = (f"{count} GPU" + ("s" if count != 1 else "")) if torch.version.cuda else \
            f"none: torch {torch.__version__} is a CPU build"
        raise ConfigError(f"device: {device} was asked for, but torch here sees {seen}; "
                          "use --device cpu, or run where the GPU is")


def _cpu_warning(arch: Any, policy_path: str | None) -> str:
    """A warning, not an error: a user may mean it (a smoke test at a tiny budget)."""
    where = f"from {policy_path}" if policy_path else f"from the Hub ({arch.hub_id}) unless cached"
    return (f"warning: {arch.name} ({arch.num_parameters / 1e9:.1f}B parameters) on device cpu: "
            f"its weights (~{arch.num_parameters * 4 / 1e9:.0f} GB in float32) load {where}, and a "
            "pilot run (1e15+ FLOPs) takes hours or more on a CPU; use --device cuda")


def _raise_failed(exc: BaseException, card: ComputeCard) -> NoReturn:
    try:
        from runners.task import RunFailed
    except ImportError:  # pragma: no cover - execution ships with runners
        raise exc from None
    if isinstance(exc, RunFailed):
        if exc.card is None:
            exc.card = card
        raise exc
    from planner.errors import RaceError

    if isinstance(exc, RaceError):  # bad input (a checkpoint's shape, a data file):
        raise exc  # one line and a stop where the race runs in process, not a run retried in vain
    from planner.engine import failure_kind

    kind = failure_kind(exc)  # oom by type (MemoryError, torch's OutOfMemoryError) or message
    # A diverged policy often surfaces in sampling (torch's RuntimeError "probability tensor
    # contains either inf, nan or element < 0") before the logged loss does: the same
    # failure as a NaN loss. Only a RuntimeError: a ValueError naming an inf is bad input.
    if kind == "error" and isinstance(exc, RuntimeError) and re.search(r"\b(nan|inf)\b", str(exc).lower()):
        kind = "nan"
    raise RunFailed(f"{type(exc).__name__}: {exc}", card=card, kind=kind) from exc


def _hardware(device: str) -> str:
    import os

    if device.startswith("cuda"):
        import torch

        return f"{torch.cuda.get_device_name(torch.device(device))} (cuda)"
    return f"{platform.processor() or platform.machine()} ({os.cpu_count()} cpus)"


def _software() -> dict[str, str]:
    import peft
    import torch
    import transformers
    import trl

    return {"engine": "trl", "race-planner": tool_version(), "python": platform.python_version(),
            "torch": torch.__version__, "transformers": transformers.__version__, "trl": trl.__version__,
            "peft": peft.__version__}

