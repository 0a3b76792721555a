"""Which math library moves a race: one of ours' benchmark races replayed with each library's
CPU-dependent path pinned alone, and with all of them (``--portable-math``), side by side.

    python benchmarks/math_paths.py [--world paper] [--rep 6] [--out FILE]

Each configuration runs ``planner_bench.py`` (ours only, one world, one repetition, the
benchmark's six settings) in a fresh process with its environment: the libraries read
their pins when they load. A race is *the same* as another when its FLOPs, every setting's
rho* estimate and stake agree to the last bit. ``native`` runs twice and the portable
recipe twice, so a row that differs from its twin says the machine itself is not
deterministic. Prints a table (FLOPs in target-run units, calls right of six, median
simple regret, the race's wall time and ``planner suggest``'s with 200 records, in process
and as the command) and writes JSON. About 12 races of 40-70 s on a 2-core box.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))
if str(BENCH.parent) not in sys.path:
    sys.path.insert(0, str(BENCH.parent))

from bench_cli import check_known, run  # noqa: E402
from bench_machine import PORTABLE_MATH  # noqa: E402

# numpy 2.4's dispatch targets above its x86-64-v2 baseline: naming all of them leaves it the baseline.
NUMPY_BASELINE = "X86_V3 X86_V4 AVX512_ICL AVX512_SPR"
# (name, pins): each library's CPU-dependent choice alone, then the whole recipe.
CONFIGS: list[tuple[str, dict[str, str]]] = [
    ("native", {}),
    ("native again", {}),
    ("ATen default", {"ATEN_CPU_CAPABILITY": "default"}),
    ("ATen avx2", {"ATEN_CPU_CAPABILITY": "avx2"}),
    ("MKL COMPATIBLE", {"MKL_CBWR": "COMPATIBLE"}),
    ("MKL AVX2", {"MKL_CBWR": "AVX2"}),
    ("OpenBLAS Katmai", {"OPENBLAS_CORETYPE": "Katmai"}),
    ("OpenBLAS Haswell", {"OPENBLAS_CORETYPE": "Haswell"}),
    ("libm no FMA", {"GLIBC_TUNABLES": PORTABLE_MATH["GLIBC_TUNABLES"]}),
    ("numpy baseline", {"NPY_DISABLE_CPU_FEATURES": NUMPY_BASELINE}),
    ("portable", dict(PORTABLE_MATH)),
    ("portable again", dict(PORTABLE_MATH)),
    # Another machine, as near as one box gets: the portable pins on a CPU that offers
    # numpy nothing above its baseline, glibc nothing from AVX up, and one core. Where the
    # pins are complete this is the portable race again.
    ("portable on baseline CPU", {**PORTABLE_MATH, "NPY_DISABLE_CPU_FEATURES": NUMPY_BASELINE,
                                "GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX,-AVX2,-FMA,-FMA4,-AVX512F,-AVX512VL,"
                                                  "-AVX512BW,-AVX512DQ,-AVX512CD,-AVX2_Usable,-FMA_Usable,"
                                                  "-FMA4_Usable,-AVX512F_Usable,-AVX_Usable"}),
]
# Configurations run on fewer cores than the box has (the first N it may use).
CORES: dict[str, int] = {"portable on baseline CPU": 1}
KNOBS = sorted({k for _, pins in CONFIGS for k in pins})


def config_env(pins: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` without any knob this script turns, then ``pins`` over it: ``native``
    is the machine's own choice even when the caller's shell carries a pin."""
    return {**{k: v for k, v in environ.items() if k not in KNOBS}, **pins}


def race_key(outcome: Mapping[str, Any]) -> tuple:
    """What makes two races the same race: FLOPs spent, and each setting's rho* estimate
    and stake, exactly (a race's proposals follow its fits, so any rounding shows here)."""
    return (outcome["flops_target_units"], tuple(outcome["rho_hat"]), tuple(outcome["stake"]))


def first_cores(n: int | None) -> set[int] | None:
    """The first ``n`` cores this process may run on (None: all of them)."""
    if n is None:
        return None
    mine = sorted(os.sched_getaffinity(0))
    if n > len(mine):
        raise ValueError(f"cores: {n} asked, this process may use {len(mine)}")
    return set(mine[:n])


def replay(world: str, rep: int, pins: Mapping[str, str], out: Path, cores: int | None = None) -> dict[str, Any]:
    """One race of ours in a fresh process under ``pins`` (on the first ``cores`` cores
    where given); the results file's content."""
    cmd = [sys.executable, str(BENCH / "planner_bench.py"), "--worlds", world, "--strategies", "ours",
           "--seeds", "1", "--first-rep", str(rep), "--no-plot", "--out", str(out)]
    cpus = first_cores(cores)
    proc = subprocess.run(cmd, env=config_env(pins, os.environ), capture_output=True, text=True,
                          preexec_fn=None if cpus is None else (lambda: os.sched_setaffinity(0, cpus)))
    if proc.returncode != 0:
        raise RuntimeError(f"planner_bench.py failed under {dict(pins)}:\n{proc.stderr[-2000:]}")
    return json.loads(out.read_text())


def rows_of(docs: Sequence[tuple[str, Mapping[str, str], dict[str, Any]]]) -> list[dict[str, Any]]:
    """A row per configuration, each compared with the first (``native``)."""
    base = race_key(docs[0][2]["outcomes"][0])
    rows = []
    for name, pins, doc in docs:
        o, lat = doc["outcomes"][0], doc.get("suggest_latency", {})
        rows.append({"config": name, "pins": dict(pins), "flops_target_units": o["flops_target_units"],
                     "right": sum(o["same"]), "calls": len(o["same"]), "regret_median": o["regret_median"],
                     # Files before 12-05 have only wall_s, which also holds ~12-15 s of latency timing.
                     "race_s": doc.get("races_wall_s", doc["wall_s"]), "suggest_200_s": lat.get("records_200_s"),
                     "cli_suggest_200_s": lat.get("cli_records_200_s"),
                     "same_as_native": race_key(o) == base, "key": list(race_key(o)),
                     "blas": [b.get("architecture") for b in doc["machine"]["blas"] if b.get("architecture")],
                     "torch_cpu_capability": doc["machine"]["torch_cpu_capability"],
                     "usable_cpus": doc["machine"].get("usable_cpus")})
    return rows


def print_rows(rows: Sequence[dict[str, Any]], machine: Mapping[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"One race of ours under each math path ({machine['cpu']}, {machine['cpus']} cores)")
    for c in ("config", "pins", "FLOPs (units)", "right", "regret", "race s", "suggest 200 s",
              "CLI 200 s", "same race as native"):
        t.add_column(c, justify="left" if c in ("config", "pins") else "right")
    for r in rows:
        pins = " ".join(f"{k}={v}" for k, v in r["pins"].items()) if r["pins"] else "-"
        if len(pins) > 40:
            pins = pins[:37] + "..."
        if r["pins"] == PORTABLE_MATH:
            pins = "all (--portable-math)"
        elif set(PORTABLE_MATH) < set(r["pins"]):
            pins = "portable, more masked: " + " ".join(k for k in r["pins"] if r["pins"][k] != PORTABLE_MATH.get(k))
        if r.get("usable_cpus") is not None and r["usable_cpus"] != machine.get("usable_cpus"):
            pins += f" ({r['usable_cpus']} core)"
        t.add_row(r["config"], pins, f"{r['flops_target_units']:.4f}", f"{r['right']}/{r['calls']}",
                  f"{r['regret_median']:.4f}", f"{r['race_s']:.0f}",
                  "-" if r["suggest_200_s"] is None else f"{r['suggest_200_s']:.2f}",
                  "-" if r["cli_suggest_200_s"] is None else f"{r['cli_suggest_200_s']:.2f}",
                  "yes" if r["same_as_native"] else "no")
    Console(width=200).print(t)
    twins = {r["config"]: r for r in rows}
    for name in ("native", "portable"):
        a, b = twins.get(name), twins.get(f"{name} again")
        if a and b:
            print(f"{name} twice: {'the same race' if a['key'] == b['key'] else 'DIFFERENT races'}; "
                  f"race time {b['race_s'] / a['race_s']:.2f}x the first")
    if "portable" in twins:
        for r in rows:
            if r["config"].startswith("portable on "):
                same = r["key"] == twins["portable"]["key"]
                print(f"{r['config']}: {'the same race as portable' if same else 'ANOTHER race than portable'}")
    nat = [r["race_s"] for r in rows if not r["pins"]]
    por = [r["race_s"] for r in rows if r["pins"] == PORTABLE_MATH]
    if nat and por:
        print(f"portable / native race time (means over the twins): {sum(por) / len(por) / (sum(nat) / len(nat)):.2f}")


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", default="paper")
    ap.add_argument("--rep", type=int, default=6, help="the repetition (seed) of the race replayed")
    ap.add_argument("--configs", default=None,
                    help=f"comma-separated subset of: {', '.join(n for n, _ in CONFIGS)} (default: all)")
    ap.add_argument("--out", default=None, help="results JSON (default: none)")
    a = ap.parse_args(list(argv) if argv is not None else None)
    from planner.errors import ConfigError
    from runners.sim import list_worlds

    check_known("world", [a.world], [p.stem for p in list_worlds()])
    if a.rep < 0:
        raise ConfigError(f"rep: repetitions are numbered from 0, got {a.rep}")
    names = [n for n, _ in CONFIGS]
    chosen = names if a.configs is None else [c.strip() for c in a.configs.split(",") if c.strip()]
    check_known("configs", chosen, names)
    if chosen[0] != "native":
        raise ConfigError("configs: start with native, the race every other row is compared with")
    from rich.progress import (
        BarColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    docs = []
    with tempfile.TemporaryDirectory() as tmp, Progress(
            TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total} races"),
            TimeElapsedColumn(), TimeRemainingColumn()) as bar:
        task = bar.add_task(f"{a.world} rep {a.rep}", total=len(chosen))
        for i, name in enumerate(chosen):
            pins = dict(CONFIGS)[name]
            bar.update(task, description=f"{a.world} rep {a.rep}: {name}")
            docs.append((name, pins, replay(a.world, a.rep, pins, Path(tmp) / f"{i}.json", CORES.get(name))))
            bar.advance(task)
    rows = rows_of(docs)
    machine = docs[0][2]["machine"]
    print_rows(rows, machine)
    doc = {"world": a.world, "rep": a.rep, "machine": machine, "rows": rows}
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(doc, indent=2))
        print(f"wrote {a.out}")
    return doc


if __name__ == "__main__":
    run(main)
