"""FlopMeter: forward hooks on the policy (and a reward model) that count the FLOPs
executed, by phase, with the pure accountant. See the package docstring for the phase rules."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

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
from planner.architecture import Architecture
from runners.meter.architecture import unwrap

__all__ = ["LOG_KEYS", "TOKEN_KEYS", "FlopMeter"]

LOG_KEYS: tuple[str, ...] = ("flops/search", "flops/learning", "flops/reward", "flops/total", "rho")
TOKEN_KEYS: tuple[str, ...] = (
    "prompt_generated",
    "completion_generated",
    "trained",
    "logprob_forward",
    "reward_scored",
)


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
    early_stop: bool = True  # non-reentrant checkpointing's recompute skips each layer's last matmul


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
    # False while work outside the run's allocation runs through the hooked model (a
    # trainer's evaluation): no FLOPs, tokens or wall time are counted.
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
        if self.enabled:
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
        """Generation by an engine without padding (vLLM): one KV-cached sample per sequence.
        No adapter FLOPs: TRL loads vLLM with the adapter merged into the weights
        (``merge_adapter`` in ``trl/generation/vllm_generation.py``), so each token costs
        the base model's matmuls only."""
        f = float(sum(generation_flops(self.policy, p, c, lora=None) for p, c in zip(prompt_lens, completion_lens, strict=True)))
        self._add("search", f, "generate")
        self._tok("prompt_generated", sum(prompt_lens))
        self._tok("completion_generated", sum(completion_lens))
        return f

    def add_train_pass(
        self, batch: int, seq: int, positions: int, *, checkpointing: bool, input_requires_grad: bool,
        lm_head_recompute: bool = True, head_trainable: bool = False, early_stop: bool = True,
    ) -> float:
        """Forward + backward of one micro-batch; ``positions`` = LM-head positions in total.
        ``early_stop``: the checkpointed recompute stops before each layer's last matmul
        (non-reentrant checkpointing); reentrant checkpointing recomputes the layer whole.

        LoRA (``self.lora``): adapter weight gradients only. Without an adapter, full
        fine-tuning: every linear also gets its weight gradient (``2 * in * out`` per token)
        and the embeddings need gradients, so layer-0 q/k/v compute input gradients.
        """
        a = self.policy
        if self.lora is not None:
            f = train_pass_flops(a, batch, seq, self.lora, logit_positions=0, flash_attention=self.fused_attention,
                                 gradient_checkpointing=checkpointing, input_requires_grad=input_requires_grad,
                                 checkpoint_early_stop=early_stop)
        else:
            f = train_pass_flops(a, batch, seq, LoRA(1, ()), logit_positions=0, flash_attention=self.fused_attention,
                                 gradient_checkpointing=checkpointing, input_requires_grad=True,
                                 checkpoint_early_stop=early_stop)
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

    @property
    def attached(self) -> bool:
        """Whether the policy is hooked (:meth:`attach`, until :meth:`detach`)."""
        return self._policy_attached

    def attach(self, model: Any) -> None:
        """Hook the policy (a peft model, or a plain causal LM) until :meth:`detach`."""
        if self._policy_attached:
            return
        self._policy_attached = True
        base = unwrap(model)
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
            self.add_scorer_forward(*_batch_seq(args, kwargs))

        self._handles.append(module.register_forward_pre_hook(pre, with_kwargs=True))

    def watch_reference(self, module: Any) -> None:
        """Meter every forward of a separate reference model ``module`` as a reference
        log-prob pass (full fine-tuning with beta > 0: TRL keeps a frozen copy of the policy;
        with LoRA the reference is the policy with its adapters off, seen by :meth:`attach`)."""

        def pre(_m: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            batch, seq = _batch_seq(args, kwargs)
            self.add_logprob_forward(batch, seq, self._head_positions(kwargs, batch, seq), lora_active=False)

        self._handles.append(unwrap(module).register_forward_pre_hook(pre, with_kwargs=True))

    def detach(self) -> None:
        """Remove every hook: the policy's and the watched reward and reference models'."""
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

        batch, seq = _batch_seq(args, kwargs)
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
        positions = self._head_positions(kwargs, batch, seq)
        kind = "train" if grad and module.training else "logprob" if kwargs.get("fused_lm_head") else "forward"
        ckpt, early = _checkpointing(module) if kind == "train" else (False, True)
        self._stack.append(_Call(now, batch, seq, kind, seq, positions, self._lora_active(), ckpt,
                                 bool(kwargs.get("fused_lm_head")), early))

    def _head_positions(self, kwargs: dict[str, Any], batch: int, seq: int) -> int:
        """LM-head positions of a forward that is not a decode step: the fused log-prob
        head's, else ``logits_to_keep`` per sequence (0: all)."""
        if kwargs.get("fused_lm_head"):
            return self._fused_positions(kwargs, batch, seq)
        keep = kwargs.get("logits_to_keep", 0)
        return batch * (seq if not keep else min(int(keep), seq))

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
                early_stop=c.early_stop,
            )
        elif c.kind == "logprob":
            self.add_logprob_forward(c.batch, c.seq, c.positions, lora_active=c.lora_active)


def _batch_seq(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int, int]:
    """(batch, seq) of a forward's input, given as ``input_ids`` or ``inputs_embeds``."""
    x = kwargs.get("input_ids", args[0] if args else None)
    if x is None:
        x = kwargs["inputs_embeds"]
    return int(x.shape[0]), int(x.shape[1])


def _checkpointing(module: Any) -> tuple[bool, bool]:
    """(activation checkpointing on, its recompute stops early), as the model runs it.

    transformers 5 (renamed from gradient_) gives each checkpointed layer a
    ``functools.partial`` of torch's ``checkpoint`` with the run's kwargs: its own default
    is ``use_reentrant=False`` (early stop); kwargs without the key (TRL passes the
    config's dict as it is) leave torch 2.13 its default, reentrant, which recomputes each
    layer whole (``train_pass_flops(..., checkpoint_early_stop=False)``)."""
    flag = getattr(type(module), "is_activation_checkpointing", None)
    on = bool(module.is_activation_checkpointing) if flag is not None else \
        bool(getattr(module, "is_gradient_checkpointing", False))
    if not on:
        return False, True
    for sub in module.modules():
        func = getattr(sub, "_gradient_checkpointing_func", None)
        if func is not None and getattr(sub, "gradient_checkpointing", False):
            reentrant = getattr(func, "keywords", {}).get("use_reentrant", True)
            return True, not reentrant
    return True, True
