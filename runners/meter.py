"""The FLOP meter: what a GRPO/LoRA run actually spent on search, learning and reward.

:class:`FlopMeter` hooks the policy (and any reward model) and, for every forward pass
that runs, reads the shapes that executed -- padded batch x length, KV-cache length,
positions whose logits were computed, whether a gradient follows, whether the LoRA
adapters were active -- and converts them with the pure accountant
(:mod:`planner.accountant`). Nothing is estimated from plans: a decode step that runs for
a sequence that already finished is counted, because it was computed.

Phase of a policy forward, from what the call itself carries:

* a KV cache passed (``cache``, formerly ``past_key_values``) -> **search** (a ``generate`` prefill or decode step);
* TRL's fused log-prob call (``fused_lm_head=True``) with grad enabled -> **learning**,
  one LoRA training pass (forward + backward, + recompute under activation checkpointing,
  + the chunked LM head's logit recompute in backward);
* the same call without grad -> **learning**, an old-policy (adapters on) or reference
  (adapters off) log-prob forward;
* a forward of a watched reward model -> **reward**.

:class:`FlopMeterCallback` is the public, drop-in ``transformers.TrainerCallback``: add it
to any ``GRPOTrainer`` and the trainer's logs gain ``flops/search``, ``flops/learning``,
``flops/reward``, ``flops/total`` and ``rho``. :class:`BudgetGuard` stops training once the
metered total reaches a budget. See docs/meter.md.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from transformers.trainer_callback import TrainerCallback

from planner.accountant import (
    FlopsBreakdown,
    LoRA,
    attention_flops,
    forward_flops,
    generation_flops,
    linear_flops_per_token,
    lm_head_flops_per_token,
    lora_forward_flops_per_token,
    rotary_flops,
    train_pass_flops,
)
from planner.architecture import LINEAR_MODULES, Architecture

__all__ = [
    "LOG_KEYS",
    "BudgetGuard",
    "FlopMeter",
    "FlopMeterCallback",
    "architecture_from_config",
]

LOG_KEYS: tuple[str, ...] = ("flops/search", "flops/learning", "flops/reward", "flops/total", "rho")
TOKEN_KEYS: tuple[str, ...] = (
    "prompt_generated",
    "completion_generated",
    "trained",
    "logprob_forward",
    "reward_scored",
)


def architecture_from_config(config: Any, name: str = "model", *, score_head: tuple[int, ...] = ()) -> Architecture:
    """The accountant's view of a Hugging Face decoder config (Qwen2/Llama-style fields)."""
    cfg = config.get_text_config() if hasattr(config, "get_text_config") else config
    return Architecture(
        name=name,
        role="prm" if score_head else "policy",
        family="hf",
        hidden_size=cfg.hidden_size,
        num_hidden_layers=cfg.num_hidden_layers,
        num_attention_heads=cfg.num_attention_heads,
        num_key_value_heads=getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads,
        intermediate_size=cfg.intermediate_size,
        vocab_size=cfg.vocab_size,
        tie_word_embeddings=bool(getattr(cfg, "tie_word_embeddings", False)),
        max_position_embeddings=getattr(cfg, "max_position_embeddings", 32768),
        score_head=score_head,
    )


def lora_from_model(model: Any) -> LoRA | None:
    """Rank and target modules of the active peft LoRA adapter, or None without one.

    The wrapped layers are read off the model itself (modules with ``lora_A``), because
    after injection peft's ``target_modules`` may hold full paths
    (``model.layers.0.self_attn.q_proj``), ``"all-linear"`` or a regex, none of which
    names a module type; before injection the config is read, by last name component."""
    configs = getattr(model, "peft_config", None)
    if not configs:
        return None
    cfg = configs.get(getattr(model, "active_adapter", "default")) or next(iter(configs.values()))
    wrapped: set[str] = set()
    named = getattr(model, "named_modules", None)
    if callable(named):
        wrapped = {name.rsplit(".", 1)[-1] for name, mod in named() if hasattr(mod, "lora_A")}
    if not wrapped:
        targets = cfg.target_modules
        if targets == "all-linear":
            wrapped = set(LINEAR_MODULES)
        else:
            names = (targets,) if isinstance(targets, str) else tuple(targets or ())
            wrapped = {str(n).rsplit(".", 1)[-1] for n in names}
    chosen = tuple(m for m in LINEAR_MODULES if m in wrapped)
    if not chosen:
        import warnings

        warnings.warn("FlopMeter: a peft model with no LoRA on the policy's linear layers "
                      f"(target_modules={cfg.target_modules!r}); metering it as full fine-tuning", stacklevel=2)
        return None
    return LoRA(int(cfg.r), chosen)


def _unwrap(model: Any) -> Any:
    """The causal LM under DDP/accelerate (``.module``) and peft (``get_base_model``)."""
    while hasattr(model, "module") and not hasattr(model, "get_base_model"):
        model = model.module
    return model.get_base_model() if hasattr(model, "get_base_model") else model


@dataclass
class _Call:
    start: float
    batch: int
    seq: int
    kind: str  # "generate" | "train" | "logprob" | "forward"
    kv_len: int
    positions: int  # total logit positions over the batch
    lora_active: bool
    checkpointing: bool
    fused: bool = False


@dataclass
class FlopMeter:
    """Counts executed FLOPs, tokens and wall time of one run, by phase.

    ``policy``/``lora`` describe the trained model, ``scorer`` the reward model whose
    forwards :meth:`add_scorer_forward` (or :meth:`watch_scorer`) reports.
    """

    policy: Architecture
    lora: LoRA | None = None
    scorer: Architecture | None = None
    flops: dict[str, float] = field(default_factory=lambda: dict.fromkeys(("search", "learning", "reward"), 0.0))
    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TOKEN_KEYS, 0))
    wall: dict[str, float] = field(default_factory=lambda: dict.fromkeys(("search", "learning", "reward"), 0.0))
    passes: dict[str, int] = field(default_factory=dict)
    enabled: bool = True
    # Fused SDPA / flash kernels recompute QK^T in backward (set from the model at attach).
    fused_attention: bool = False
    _handles: list[Any] = field(default_factory=list, repr=False)
    _stack: list[_Call] = field(default_factory=list, repr=False)
    _lora_layers: list[Any] = field(default_factory=list, repr=False)
    _embeds_need_grad: bool = field(default=False, repr=False)
    _explicit: str | None = field(default=None, repr=False)
    _gen_mark: float | None = field(default=None, repr=False)
    _head: Any = field(default=None, repr=False)
    _policy_attached: bool = field(default=False, repr=False)

    # ----------------------------------------------------------------- totals

    def breakdown(self) -> FlopsBreakdown:
        return FlopsBreakdown(self.flops["search"], self.flops["learning"], self.flops["reward"])

    @property
    def total(self) -> float:
        return self.breakdown().total

    def log_dict(self, prefix: str = "flops/") -> dict[str, float]:
        b = self.breakdown()
        return {
            f"{prefix}search": b.search,
            f"{prefix}learning": b.learning,
            f"{prefix}reward": b.reward,
            f"{prefix}total": b.total,
            "rho": b.rho,
        }

    def _add(self, phase: str, flops: float, kind: str) -> None:
        if self.enabled:
            self.flops[phase] += flops
            self.passes[kind] = self.passes.get(kind, 0) + 1

    def _tok(self, key: str, n: int) -> None:
        if self.enabled:
            self.tokens[key] += int(n)

    def add_wall(self, phase: str, seconds: float) -> None:
        self.wall[phase] = self.wall.get(phase, 0.0) + seconds

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Attribute the wall time of the block to ``name`` (hooks inside add FLOPs, not time)."""
        outer, self._explicit = self._explicit, name
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self._explicit = outer
            if outer is None:
                self.add_wall(name, time.perf_counter() - t0)

    # ----------------------------------------------------------------- explicit counts

    def add_generation_forward(
        self, batch: int, q_len: int, kv_len: int, positions: int, *, lora_active: bool = True
    ) -> float:
        """One ``generate`` forward: ``batch`` sequences of ``q_len`` new tokens attending to
        ``kv_len`` (cache + new); ``positions`` logits in total."""
        a = self.policy
        per_tok = linear_flops_per_token(a)
        if self.lora is not None and lora_active:
            per_tok += lora_forward_flops_per_token(a, self.lora)
        f = batch * (q_len * per_tok + attention_flops(a, q_len, kv_len) + rotary_flops(a, q_len))
        f += positions * lm_head_flops_per_token(a)
        self._add("search", f, "generate")
        return f

    def add_generated_sequences(self, prompt_lens: Sequence[int], completion_lens: Sequence[int]) -> float:
        """Generation by an engine without padding (vLLM): one KV-cached sample per sequence."""
        f = float(sum(generation_flops(self.policy, p, c, lora=self.lora) for p, c in zip(prompt_lens, completion_lens, strict=True)))
        self._add("search", f, "generate")
        self._tok("prompt_generated", sum(prompt_lens))
        self._tok("completion_generated", sum(completion_lens))
        return f

    def add_train_pass(
        self, batch: int, seq: int, positions: int, *, checkpointing: bool, input_requires_grad: bool,
        lm_head_recompute: bool = True, head_trainable: bool = False,
    ) -> float:
        """Forward + backward of one micro-batch; ``positions`` = LM-head positions in total.

        LoRA (``self.lora``): adapter weight gradients only. Without an adapter, full
        fine-tuning: every linear also gets its weight gradient (``2 * in * out`` per token)
        and the embeddings need gradients, so layer-0 q/k/v compute input gradients.
        """
        a = self.policy
        if self.lora is not None:
            f = train_pass_flops(a, batch, seq, self.lora, logit_positions=0, flash_attention=self.fused_attention,
                                 gradient_checkpointing=checkpointing, input_requires_grad=input_requires_grad)
        else:
            f = train_pass_flops(a, batch, seq, LoRA(1, ()), logit_positions=0, flash_attention=self.fused_attention,
                                 gradient_checkpointing=checkpointing, input_requires_grad=True)
            f += batch * seq * linear_flops_per_token(a)
        # LM head: forward 2dV and the hidden-state gradient 2dV per position, plus the
        # chunked head's logit recompute in backward, plus its weight gradient if trained.
        f += positions * lm_head_flops_per_token(a) * (2 + int(lm_head_recompute) + int(head_trainable))
        self._add("learning", f, "train")
        self._tok("trained", batch * seq)
        return f

    def add_logprob_forward(self, batch: int, seq: int, positions: int, *, lora_active: bool) -> float:
        """A no-grad log-prob forward: old policy (adapters on) or reference (adapters off)."""
        lora = self.lora if lora_active else None
        f = forward_flops(self.policy, batch, seq, logit_positions=0, lora=lora)
        f += positions * lm_head_flops_per_token(self.policy)
        self._add("learning", f, "old_logprobs" if lora_active else "ref_logprobs")
        self._tok("logprob_forward", batch * seq)
        return f

    def add_scorer_forward(self, batch: int, seq: int) -> float:
        """One reward-model forward over ``batch`` padded sequences of ``seq`` tokens."""
        if self.scorer is None:
            raise ValueError("FlopMeter has no scorer architecture to meter reward-model forwards")
        f = float(forward_flops(self.scorer, batch, seq))
        self._add("reward", f, "score")
        self._tok("reward_scored", batch * seq)
        return f

    # ----------------------------------------------------------------- hooks

    def attach(self, model: Any) -> None:
        """Hook the policy (a peft model, or a plain causal LM) until :meth:`detach`."""
        if self._policy_attached:
            return
        self._policy_attached = True
        base = _unwrap(model)
        try:
            from peft.tuners.tuners_utils import BaseTunerLayer

            self._lora_layers = [m for m in base.modules() if isinstance(m, BaseTunerLayer)]
        except ImportError:  # pragma: no cover - peft is a dependency
            self._lora_layers = []
        self._handles.append(base.register_forward_pre_hook(self._pre, with_kwargs=True))
        self._handles.append(base.register_forward_hook(self._post, with_kwargs=True))
        self._head = base.get_output_embeddings()
        impl = getattr(base.config, "_attn_implementation", None) or "eager"
        self.fused_attention = impl != "eager"
        emb = base.get_input_embeddings()
        self._handles.append(emb.register_forward_hook(self._embedding_seen))

    def watch_scorer(self, module: Any) -> None:
        """Meter every forward of a reward model ``module`` (input ``(batch, seq)``) as reward."""

        def pre(_m: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            x = kwargs.get("input_ids", args[0] if args else None)
            if x is None:
                x = kwargs["inputs_embeds"]
            self.add_scorer_forward(int(x.shape[0]), int(x.shape[1]))

        self._handles.append(module.register_forward_pre_hook(pre, with_kwargs=True))

    def detach(self) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self._stack.clear()
        self._policy_attached = False

    def _lora_active(self) -> bool:
        if self.lora is None or not self._lora_layers:
            return False
        layer = self._lora_layers[0]
        return not (layer.disable_adapters or layer.merged)

    def _embedding_seen(self, _m: Any, _args: Any, out: Any) -> None:
        # peft + activation checkpointing makes the embedding output require grad
        # (enable_input_require_grads); then layer-0 q/k/v also compute input gradients.
        self._embeds_need_grad = bool(getattr(out, "requires_grad", False))

    def _pre(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        import torch

        x = kwargs.get("input_ids", args[0] if args else None)
        if x is None:
            x = kwargs.get("inputs_embeds")
        batch, seq = int(x.shape[0]), int(x.shape[1])
        # transformers 5 names the KV cache `cache` (older releases: `past_key_values`).
        past = kwargs.get("cache", kwargs.get("past_key_values"))
        now = time.perf_counter()
        if past is not None:
            past_len = int(past.get_seq_length()) if hasattr(past, "get_seq_length") else 0
            if past_len == 0:
                self._gen_mark = now  # a new generate call starts with its prefill
            keep = kwargs.get("logits_to_keep", 0)
            per_seq = seq if isinstance(keep, int) and keep == 0 else (min(int(keep), seq) if isinstance(keep, int) else int(keep.numel()))
            self._stack.append(_Call(now, batch, seq, "generate", past_len + seq, batch * per_seq, self._lora_active(), False))
            return
        grad = torch.is_grad_enabled()
        if kwargs.get("fused_lm_head"):
            positions = self._fused_positions(kwargs, batch, seq)
        else:
            keep = kwargs.get("logits_to_keep", 0)
            positions = batch * (seq if not keep else min(int(keep), seq))
        kind = "train" if grad and module.training else "logprob" if kwargs.get("fused_lm_head") else "forward"
        ckpt = kind == "train" and _checkpointing(module)
        self._stack.append(_Call(now, batch, seq, kind, seq, positions, self._lora_active(), ckpt,
                                 bool(kwargs.get("fused_lm_head"))))

    @staticmethod
    def _fused_positions(kwargs: dict[str, Any], batch: int, seq: int) -> int:
        from runners.grpo.compat import lm_head_scores_only_labels

        shift = kwargs.get("shift_labels")
        labels = shift if shift is not None else kwargs.get("labels")
        if labels is None:
            return batch * (seq - 1)
        valid = labels if shift is not None else labels[:, 1:]
        if lm_head_scores_only_labels(labels.device):
            return int((valid != -100).sum())
        return int(valid.numel())

    def _post(self, _module: Any, _args: Any, _kwargs: Any, _out: Any) -> None:
        if not self._stack:
            return
        c = self._stack.pop()
        now = time.perf_counter()
        if c.kind == "generate":
            self.add_generation_forward(c.batch, c.seq, c.kv_len, c.positions, lora_active=c.lora_active)
            if c.kv_len == c.seq:  # prefill: the prompt tokens, and the first sampled token
                self._tok("prompt_generated", c.batch * c.seq)
            self._tok("completion_generated", c.batch)
            if self._explicit is None and self._gen_mark is not None:
                # Time from the prefill through sampling between steps belongs to search.
                self.add_wall("search", now - self._gen_mark)
                self._gen_mark = now
        elif c.kind == "train":
            self.add_train_pass(
                c.batch, c.seq, c.positions, checkpointing=c.checkpointing,
                input_requires_grad=self._embeds_need_grad, lm_head_recompute=c.fused,
                head_trainable=self._head is not None and bool(self._head.weight.requires_grad),
            )
        elif c.kind == "logprob":
            self.add_logprob_forward(c.batch, c.seq, c.positions, lora_active=c.lora_active)


def _checkpointing(module: Any) -> bool:
    """Whether activation checkpointing is on (transformers 5 renamed it from gradient_)."""
    flag = getattr(type(module), "is_activation_checkpointing", None)
    if flag is not None:
        return bool(module.is_activation_checkpointing)
    return bool(getattr(module, "is_gradient_checkpointing", False))


class FlopMeterCallback(TrainerCallback):
    """Drop-in callback: meters any (GRPO) trainer's policy and logs the compute allocation.

    ``meter=None`` builds a :class:`FlopMeter` from the model's config and peft adapter at
    ``on_train_begin``. ``reward_models`` are modules whose forwards count as reward FLOPs
    (their config gives the scorer shape). Every log gains :data:`LOG_KEYS`. ``budget``
    adds a :class:`BudgetGuard` on the same meter (``steps_per_round``: GRPO's
    ``num_iterations``). Add it with :meth:`attach` so integrations (W&B, TensorBoard)
    that run before user callbacks see the keys too.
    """

    def __init__(
        self,
        meter: FlopMeter | None = None,
        *,
        reward_models: Sequence[Any] = (),
        scorer_head: tuple[int, ...] = (1,),
        progress: Callable[[FlopMeter, Any], None] | None = None,
        budget: float | None = None,
        steps_per_round: int = 1,
    ) -> None:
        self.meter = meter
        self.budget = budget
        self.steps_per_round = steps_per_round
        self.guard: BudgetGuard | None = None
        self.reward_models = tuple(reward_models)
        self.scorer_head = scorer_head
        self.progress = progress
        self._step_start: float | None = None
        self._walls_at_step: dict[str, float] = {}
        self.train_wall = 0.0

    @classmethod
    def attach(cls, trainer: Any, **kwargs: Any) -> FlopMeterCallback:
        """Create a callback and put it first, ahead of the reporting integrations."""
        cb = cls(**kwargs)
        trainer.callback_handler.callbacks.insert(0, cb)
        return cb

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        if self.meter is None:
            base = _unwrap(model)
            scorer = None
            if self.reward_models:
                scorer = architecture_from_config(self.reward_models[0].config, "reward-model", score_head=self.scorer_head)
            self.meter = FlopMeter(architecture_from_config(base.config), lora=lora_from_model(model), scorer=scorer)
            for rm in self.reward_models:
                self.meter.watch_scorer(rm)
        self.meter.attach(model)
        if self.budget is not None:
            self.guard = BudgetGuard(self.meter, self.budget, steps_per_round=self.steps_per_round)
            self.guard.on_train_begin(args, state, control)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        assert self.meter is not None
        self._step_start = time.perf_counter()
        self._walls_at_step = {k: self.meter.wall.get(k, 0.0) for k in ("search", "reward")}

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        assert self.meter is not None
        if self._step_start is not None:
            step = time.perf_counter() - self._step_start
            self.train_wall += step
            other = sum(self.meter.wall.get(k, 0.0) - v for k, v in self._walls_at_step.items())
            # Backward passes are invisible to forward hooks: learning = the step minus the
            # search and reward time measured inside it.
            self.meter.add_wall("learning", max(0.0, step - other))
        if self.guard is not None:
            self.guard.on_step_end(args, state, control)
        if self.progress is not None:
            self.progress(self.meter, state)

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if self.meter is None or logs is None:
            return
        values = self.meter.log_dict()
        logs.update(values)
        # Trainer.log appended a copy of `logs` to the history before calling us.
        if state.log_history and state.log_history[-1] is not logs:
            state.log_history[-1].update(values)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.meter is not None:
            self.meter.detach()


class BudgetGuard(TrainerCallback):
    """Stops training when the metered total reaches ``budget``, at a round boundary.

    A round is ``steps_per_round`` optimizer steps on one rollout batch (GRPO's
    ``num_iterations`` with one optimizer step per generation batch); stopping inside a
    round would waste its rollouts. :meth:`groups_for_round` sizes the next round from the
    measured cost per prompt group so the run lands on the budget rather than one round
    past it; trainers that cannot shrink a round (a stock ``GRPOTrainer``) stop at the
    boundary closest to the budget instead.
    """

    def __init__(
        self,
        meter: FlopMeter,
        budget: float,
        *,
        steps_per_round: int = 1,
        groups_per_round: int | None = None,
        group_cost: float | None = None,
        partial_rounds: bool = False,
    ) -> None:
        if not math.isfinite(budget) or budget <= 0:
            raise ValueError("budget must be a positive finite number of FLOPs")
        self.meter = meter
        self.budget = float(budget)
        self.steps_per_round = max(1, steps_per_round)
        self.groups_per_round = groups_per_round
        self.initial_group_cost = group_cost
        self.partial_rounds = partial_rounds
        self.stop_reason: str | None = None
        self._round_spent = 0.0
        self._round_groups: int | None = None
        self._recent: deque[float] = deque(maxlen=3)
        self.rounds: list[int] = []

    def group_cost(self) -> float | None:
        """FLOPs of one prompt group over a whole round, from the last completed rounds."""
        if self._recent:
            return sum(self._recent) / len(self._recent)
        return self.initial_group_cost

    def groups_for_round(self, requested: int, multiple: int = 1) -> int:
        """How many of ``requested`` prompt groups the round about to generate may have."""
        n = self._affordable(requested, multiple)
        self._round_groups = n
        if n > 0:
            self.rounds.append(n)
        return n

    def _affordable(self, requested: int, multiple: int = 1) -> int:
        remaining = self.budget - self.meter.total
        cost = self.group_cost()
        if remaining <= 0:
            return 0
        if cost is None or cost <= 0:
            return requested
        if not self.partial_rounds:
            # All or nothing: run the round if that lands closer to the budget than stopping.
            return requested if remaining >= requested * cost / 2 else 0
        n = min(requested, round(remaining / cost))
        return (n // multiple) * multiple

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._round_spent = self.meter.total

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if self.meter.total >= self.budget:
            self.stop_reason = "budget"
            control.should_training_stop = True
            return
        if state.global_step % self.steps_per_round:
            return
        # A round just ended: learn its cost per prompt group, then decide on the next one.
        groups = self._round_groups or self.groups_per_round or 1
        spent = self.meter.total - self._round_spent
        if spent > 0:
            self._recent.append(spent / groups)
        self._round_spent = self.meter.total
        self._round_groups = None
        if self._affordable(self.groups_per_round or 1) == 0:
            self.stop_reason = "budget"
            control.should_training_stop = True
