"""Backend settings: validated from CLI flags and from a ``--backend-config`` TOML file.

The file has one optional table per backend::

    [slurm]
    partition = "gpu"
    time_min = 240
    gpus_per_run = 1
    mem_gb = 64
    extra = { slurm_account = "rl", slurm_qos = "high" }

    [ray]
    address = "ray://head:10001"

Flags win over the file. Any mistake is a one-line ConfigError naming the field.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from planner.errors import ConfigError
from planner.schema import first_error

__all__ = ["BackendConfig", "LocalOptions", "RayOptions", "SlurmOptions", "backend_options", "load_backend_config", "validate_options"]

_STRICT = ConfigDict(extra="forbid", frozen=True)
_Scalar = str | int | float | bool
# submitit parameters that take a list of strings (after the slurm_ or local_ prefix).
_LIST_PARAMETERS = frozenset({"setup", "teardown", "srun_args"})
MAX_CONFIG_BYTES = 1024 * 1024


class LocalOptions(BaseModel):
    """``[local]`` of a backend config: the GPUs to pin one worker each to, and how many runs a
    worker takes before it is replaced."""
    model_config = _STRICT
    devices: tuple[str, ...] | None = Field(None, description="GPU ids, one worker each")
    max_tasks_per_worker: int | None = Field(None, ge=1, description="recycle a worker after N runs")


class RayOptions(BaseModel):
    """``[ray]`` of a backend config: the cluster address and the GPUs and CPUs of one run."""
    model_config = _STRICT
    address: str | None = Field(None, description="cluster address; None starts a local Ray")
    gpus_per_run: float | None = Field(None, ge=0, le=64)
    cpus_per_run: float = Field(1.0, gt=0, le=1024)


class SlurmOptions(BaseModel):
    """``[slurm]`` of a backend config: partition, job time limit, GPUs, CPUs and memory of
    one run, submitit's folder and cluster, and further ``slurm_*`` / ``local_*`` parameters
    (``extra``)."""
    model_config = _STRICT
    partition: str | None = None
    time_min: int | None = Field(None, ge=1, le=60 * 24 * 30, description="job time limit")
    gpus_per_run: int | None = Field(None, ge=0, le=64)
    cpus_per_run: int = Field(1, ge=1, le=1024)
    mem_gb: float | None = Field(None, gt=0, le=1e5)
    folder: str | None = Field(None, description="submitit's job and log folder")
    cluster: str | None = Field(None, description="slurm (default when found), local or debug")
    # Lists and tables too: slurm_setup (shell lines before the run: modules, a venv),
    # slurm_srun_args, slurm_additional_parameters (sbatch options submitit has no name for).
    extra: dict[str, _Scalar | list[str] | dict[str, _Scalar]] = Field(
        default_factory=dict, description="more submitit parameters, e.g. slurm_account"
    )

    @field_validator("cluster")
    @classmethod
    def _cluster(cls, v: str | None) -> str | None:
        if v is not None and v not in ("slurm", "local", "debug"):
            raise ValueError("must be slurm, local or debug")
        return v

    @field_validator("extra", mode="before")
    @classmethod
    def _prefixed(cls, v: Any) -> Any:
        if not isinstance(v, dict):
            return v  # pydantic says what it wants
        scalar = (str, int, float, bool)
        for k, x in v.items():
            if not str(k).startswith(("slurm_", "local_")):
                raise ValueError(f"key {k!r} must start with slurm_ (or local_ for cluster = \"local\"; submitit's naming)")
            if str(k).partition("_")[2] in _LIST_PARAMETERS:
                # submitit iterates these: a string would be split into one-character lines
                # or arguments (or fail at submission, with a traceback).
                if not (isinstance(x, list) and all(isinstance(i, str) for i in x)):
                    raise ValueError(f"{k} must be a list of strings, e.g. {k} = [\"module load cuda\"], "
                                     f"not {x!r}")
            elif not (isinstance(x, scalar) or (isinstance(x, list) and all(isinstance(i, str) for i in x))
                      or (isinstance(x, dict) and all(isinstance(i, scalar) for i in x.values()))):
                raise ValueError(f"{k} must be a string, number or boolean, a list of strings, or a table of "
                                 f"those scalars; got {x!r}")
        return v


class BackendConfig(BaseModel):
    """A ``--backend-config`` TOML file: its ``[local]``, ``[ray]`` and ``[slurm]`` tables."""
    model_config = _STRICT
    local: LocalOptions = LocalOptions()
    ray: RayOptions = RayOptions()
    slurm: SlurmOptions = SlurmOptions()


_MODELS: dict[str, type[BaseModel]] = {"local": LocalOptions, "ray": RayOptions, "slurm": SlurmOptions}


def _config_error(prefix: str, exc: Exception, model: type[BaseModel]) -> ConfigError:
    """One line for a validation error; a key no table takes names the ones it does (the
    bare "Extra inputs are not permitted" named the field, not the fix)."""
    from pydantic import ValidationError

    if isinstance(exc, ValidationError) and exc.errors() and exc.errors()[0]["type"] == "extra_forbidden":
        *table, key = exc.errors()[0]["loc"]
        owner: Any = model
        for part in table:
            owner = owner.model_fields[str(part)].annotation
        dotted = ".".join(map(str, (*table, key)))
        if model is BackendConfig and not table:
            what = "a table of the file"
        else:
            what = f"a setting of [{'.'.join(map(str, table))}]" if table else "a setting of this backend"
        flag = " (the number of workers is --workers, a flag)" if key == "workers" else ""
        return ConfigError(f"{prefix}: field {dotted!r} is not {what}; use one of: "
                           f"{', '.join(owner.model_fields)}{flag}")
    return ConfigError(f"{prefix}: {first_error(exc)}")


def validate_options(name: str, options: dict[str, Any]) -> dict[str, Any]:
    """Validate one backend's options; returns only those set (so defaults stay the backend's)."""
    try:
        model = _MODELS[name].model_validate(options)
    except Exception as exc:
        raise _config_error(f"backend {name}", exc, _MODELS[name]) from None
    return model.model_dump(exclude_unset=True)


def load_backend_config(path: str | Path) -> BackendConfig:
    """Read and validate a ``--backend-config`` TOML file; a missing, oversized or invalid file
    or an unknown key is a one-line :class:`~planner.errors.ConfigError`."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"backend-config: no such file {str(path)!r}")
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise ConfigError(f"backend-config: {path} is over {MAX_CONFIG_BYTES} bytes; is it the right file?")
    try:
        raw = tomllib.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"backend-config: {path} is not valid TOML ({first_error(exc)})") from None
    except RecursionError:  # tomllib recurses: an array nested thousands deep was a traceback
        raise ConfigError(f"backend-config: {path} is not a backend config (values nested too deeply to read)") from None
    try:
        return BackendConfig.model_validate(raw)
    except Exception as exc:
        raise _config_error("backend-config", exc, BackendConfig) from None


def backend_options(name: str, config: str | Path | None, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The settings backend ``name`` gets: its table of the ``--backend-config`` file (only
    the keys set there), then ``overrides`` (the flags) on top. ``name`` must be known."""
    opts: dict[str, Any] = {}
    if config is not None:
        opts.update(getattr(load_backend_config(config), name).model_dump(exclude_unset=True))
    opts.update(overrides or {})
    return opts
