"""The ``planner`` Typer app and the helpers every command shares. Heavy imports stay inside
commands so that ``planner --help`` is instant."""

from __future__ import annotations

import errno
import functools
import json
import math
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import typer

__all__ = [
    "MAX_BUDGET", "SEED_MAX", "OneLineErrors", "add_version_option", "app", "command", "emit_json", "engine_options", "guard", "parse_budget", "parse_list",
    "parse_option", "replace_unencodable", "whole_console",
]

# The largest --seed every sampler takes: Optuna's and numpy's legacy seeding stop at
# 2**32 - 1, torch's generators at 2**64 - 1 (a larger one was a traceback mid-race).
SEED_MAX = 2**32 - 1

# A run budget above this is a typo (1e180 for 1e18), not a plan: frontier pretraining runs
# are ~1e25-1e26 FLOPs. Compiling it gave plans of ~1e297 prompts, and exit 0.
MAX_BUDGET = 1e30

class OneLineErrors(typer.core.TyperGroup):
    """Usage errors (a bad option value, a missing option) as one ``error:`` line on stderr
    with exit 2, like the commands' own errors, instead of Typer's boxed panel."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        import sys

        try:  # typer >= 0.2x vendors click
            from typer._click import exceptions as cx
        except ImportError:  # pragma: no cover - older typer on the real click
            from click import exceptions as cx  # type: ignore[no-redef]

        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, False, windows_expand_args, **extra)
        except cx.NoArgsIsHelpError as exc:  # bare `planner`: the help is the answer
            typer.echo(exc.ctx.get_help())
            sys.exit(0)
        except cx.ClickException as exc:
            ctx = getattr(exc, "ctx", None)
            msg = " ".join(exc.format_message().split()).rstrip(".")
            where = ""
            if ctx is not None:  # after click's "Did you mean 'suggest'?" no "?;"
                hint = f"see `{ctx.command_path} --help`"
                where = f" ({hint})" if msg.endswith("?") else f"; {hint}"
            typer.echo(f"error: {msg}{where}", err=True)
            sys.exit(exc.exit_code)
        except typer.Abort:
            typer.echo("aborted", err=True)
            sys.exit(1)
        sys.exit(rv if isinstance(rv, int) else 0)


app = typer.Typer(
    name="planner",
    help="RACE planner: reward-aware compute allocation for GRPO/LoRA post-training.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    cls=OneLineErrors,
)


def _print_version(value: bool) -> None:
    if value:
        from planner.versions import version_line

        typer.echo(version_line())
        raise typer.Exit()


def add_version_option(typer_app: typer.Typer) -> None:
    """``--version`` on ``typer_app``: race-planner's version and the libraries' a run and a
    fit depend on (a bug report's first line), without importing any of them."""

    @typer_app.callback()
    def _root(
        version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                     help="Print race-planner's version and its libraries', then exit."),
    ) -> None:
        pass


add_version_option(app)


def parse_budget(value: str, field: str = "budget", most: float | None = MAX_BUDGET) -> float:
    """A positive, finite FLOP count like ``1e18``, at most ``most`` (None: no bound);
    raises ConfigError naming ``field``."""
    from planner.errors import ConfigError

    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{field}: {value!r} is not a number; give FLOPs like 1e18") from None
    if not math.isfinite(x) or x <= 0:
        raise ConfigError(f"{field}: must be a positive finite number of FLOPs, got {value!r}")
    if most is not None and x > most:
        raise ConfigError(f"{field}: {x:.3g} FLOPs is beyond any training run (at most {most:.0e}); "
                          "check the exponent, e.g. 1e18")
    return x


def parse_list(value: str | None, field: str = "list") -> list[str] | None:
    """Comma-separated list option (``--models a,b``); None when absent. Present but empty
    (``--rewards ''``, ``','``) is an error: silently meaning "all" would run far more."""
    if value is None:
        return None
    from planner.errors import ConfigError

    items = [v.strip() for v in value.split(",")]
    if not any(items):
        raise ConfigError(f"{field}: empty list {value!r}; give comma-separated names, or leave --{field} out "
                          "for the default")
    if not all(items):  # "a,,b" or "a,": a name lost in editing, not a wish for fewer
        raise ConfigError(f"{field}: empty item in {value!r}; give comma-separated names without empty "
                          "entries (a,b, not a,,b or a,)")
    twice = sorted({v for v in items if items.count(v) > 1})
    if twice:
        raise ConfigError(f"{field}: {', '.join(twice)} given more than once in {value!r}; give each name once")
    return items


def engine_options(engine: str, options: list[str] | None, world: str | None,
                   device: str | None = None) -> dict[str, Any]:
    """Engine options from ``-o KEY=VALUE`` flags, ``--world`` (the sim's only) and
    ``--device`` (trl's only); a world or device given both ways must be the same one."""
    from planner.errors import ConfigError

    opts: dict[str, Any] = {}
    for key, value in (parse_option(o) for o in options or []):
        # The last one silently won, while --world beside -o world= was refused.
        if key in opts and opts[key] != value:
            raise ConfigError(f"option: {key} given twice ({key}={opts[key]!r} and {key}={value!r}); give it once")
        opts[key] = value
    if world is not None:
        if engine != "sim":
            from planner.engine import available_engines

            known = available_engines()
            if ":" not in engine and engine not in known:  # the first mistake to name
                raise ConfigError(f"engine: unknown engine {engine!r}; use one of: {', '.join(known)}")
            raise ConfigError(f"world: only the sim engine takes a world, not {engine!r}; drop --world")
        if opts.get("world", world) != world:
            raise ConfigError(f"world: --world {world} and -o world={opts['world']} disagree; give one")
        opts["world"] = world  # a path or a shipped name; the sim engine resolves and checks it
    if device is not None:
        if engine != "trl":  # a sim run has no device to place
            raise ConfigError(f"device: only the trl engine takes a device, not {engine!r}; drop --device")
        if opts.get("device", device) != device:
            raise ConfigError(f"device: --device {device} and -o device={opts['device']} disagree; give one")
        opts["device"] = device
    dev = opts.get("device")
    from planner.engine import is_device

    if engine == "trl" and dev is not None and not is_device(dev):
        # Checked here for -o device= as for --device: the backend reads it before the engine.
        raise ConfigError(f"device: {dev!r} is not cpu, cuda or cuda:N")
    return opts


def parse_option(text: str) -> tuple[str, Any]:
    """An engine option ``KEY=VALUE`` (``-o quick=true``); the value is JSON when it parses."""
    from planner.errors import ConfigError

    key, sep, raw = text.partition("=")
    if not sep or not key.strip().isidentifier():
        raise ConfigError(f"option: {text!r} is not KEY=VALUE; e.g. -o eval_samples=128 (trl) or -o truth=true (sim)")
    # Python's and YAML's spellings of a bool too: "False" as a string would be truthy.
    bools = {"true": True, "false": False, "yes": True, "no": False}
    if raw.strip().lower() in bools:
        return key.strip(), bools[raw.strip().lower()]
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw  # plain strings need no quotes
    return key.strip(), value


class Terminated(KeyboardInterrupt):
    """SIGTERM (``timeout``, ``scancel``, ``kill``) where Ctrl-C would be: the same clean-up,
    so no worker is left running (and writing records) after the command has ended."""


@contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """Within: SIGTERM raises :class:`Terminated` in the main thread (elsewhere: no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum: int, frame: Any) -> None:
        # A second one must not cut the clean-up short (workers left running): ignored
        # until the block is left.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Terminated()

    old = signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def interrupted_code(exc: KeyboardInterrupt) -> int:
    """The shell's code for a command ended by SIGTERM (143) or Ctrl-C (130)."""
    return 143 if isinstance(exc, Terminated) else 130


def replace_unencodable() -> None:
    """Where stdout or stderr cannot encode every character (``PYTHONIOENCODING=ascii``,
    an old cluster's locale), write what they cannot as ``?``: a table's ``±`` or a path's
    ``é`` was a UnicodeEncodeError traceback after the work was done."""
    import sys

    for stream in (sys.stdout, sys.stderr):
        enc = (getattr(stream, "encoding", None) or "").lower().replace("-", "").replace("_", "")
        if enc not in ("utf8", "utf8sig") and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")


def whole_console(renderable: Any, stderr: bool = False) -> Any:
    """A rich Console as wide as ``renderable`` needs where the terminal (or ``COLUMNS``) is
    narrower, else the usual one: a table fitted to 80 columns by rich showed every cell as
    "qw…", "1…". Over-wide lines are the terminal's to wrap (or ``less -S``'s to scroll);
    an elided value is lost."""
    from rich.console import Console

    console = Console(stderr=stderr)
    need = console.measure(renderable, options=console.options.update_width(100_000)).maximum
    return console if need <= console.width else Console(stderr=stderr, width=need)


def emit_json(obj: Any) -> None:
    """Print ``obj`` as indented JSON on stdout (values JSON lacks, such as paths, as text)."""
    typer.echo(json.dumps(obj, indent=2, default=str))


def guard(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn user errors (:class:`~planner.errors.RaceError`) into one stderr line and exit 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from planner.errors import RaceError

        try:
            return fn(*args, **kwargs)
        except RaceError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None
        except OSError as exc:
            if exc.errno == errno.EPIPE:  # stdout's reader went away (`| head -1`): no bad path,
                raise  # and typer's main ends it quietly with 1, as rich does
            # A path the checks up front could not foresee (a disk that filled, a folder
            # removed mid-run): one line naming the file, not a traceback.
            where = f"{exc.filename}: " if exc.filename else ""
            typer.echo(f"error: {where}{exc.strerror or exc}; check the path, its permissions and free space",
                       err=True)
            raise typer.Exit(2) from None

    return wrapper


def command(target: typer.Typer = app, **kwargs: Any) -> Callable[[Callable[..., Any]], Any]:
    """``@command()``: register a guarded command on ``target``."""

    def deco(fn: Callable[..., Any]) -> Any:
        return target.command(**kwargs)(guard(fn))

    return deco
