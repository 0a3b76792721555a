"""The tiny world: a CPU-sized GRPO testbed (task, tokenizer, pretrained policies and PRMs).

Modules: ``task`` (multi-step arithmetic mod 10 with worked steps, rule grading),
``tokenizer`` (character level), ``pretrain`` (``ensure_policy``, ``ensure_prm``: SFT,
cached), ``evaluate`` (the native / pass1 / judge targets). See docs/tinyworld.md.
"""
