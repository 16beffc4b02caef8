""".env -> frozen Settings: the keys and their types, GPU profiles, load() and validate().

Precedence, lowest first: the `.env` file (or `ENV_FILE`), the process environment, then task flags.
Every value is validated before anything runs; a bad one raises `ConfigError` naming the key, the value
and the fix, which the task layer turns into exit code 2. Which file and how it is read: envfile.py; the
rules each value follows: validation.py.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
SHOWN_MAX = 60  # characters of a bad value an error message echoes


def shown_value(value: object, limit: int = SHOWN_MAX) -> str:
    """A value as an error message shows it: repr, cut to `limit` characters, never an exception.

    A 10,000-character value is not echoed whole, and an int of thousands of digits (whose str() raises
    ValueError under Python's int-string limit) is described instead of printed."""
    if value in ("", None):
        return "(empty)"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"<a number of about {int(value.bit_length() * 0.30103) + 1} digits>"
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 1] + "…"


class ConfigError(Exception):
    """A settings value or a usage error: exit 2 before any external call."""

    def __init__(self, key: str, value: object, fix: str):
        self.key, self.value, self.fix = key, value, fix
        name = key if len(key) <= SHOWN_MAX else key[:SHOWN_MAX - 1] + "…"
        super().__init__(f"{name}={shown_value(value)} is not valid: {fix}")


@dataclass(frozen=True)
class GpuProfile:
    short: str
    accelerator: str
    machine_type: str
    min_gke: str
    tuner_config: str
    gpus_per_node: int
    # What a pod may ask of one node of this machine type (allocatable, not raw).
    worker_cpu: int
    worker_memory_gi: int
    shm_gi: int

    @property
    def node_selector(self) -> dict[str, str]:
        return {"cloud.google.com/gke-accelerator": self.accelerator}


GPU_PROFILES: dict[str, GpuProfile] = {
    "b200": GpuProfile(
        short="b200",
        accelerator="nvidia-b200",
        machine_type="a4-highgpu-8g",
        min_gke="1.32.2-gke.1422000",
        tuner_config="/usr/local/gib/configs/tuner_config_a4.txtpb",
        gpus_per_node=8,
        worker_cpu=206,
        worker_memory_gi=2400,
        shm_gi=240,
    ),
    "h200": GpuProfile(
        short="h200",
        accelerator="nvidia-h200-141gb",
        machine_type="a3-ultragpu-8g",
        min_gke="1.31.4-gke.1183000",
        tuner_config="/usr/local/gib/configs/tuner_config_a3u.txtpb",
        gpus_per_node=8,
        worker_cpu=206,
        worker_memory_gi=2400,
        shm_gi=240,
    ),
}

GPU_ALIASES = {p.accelerator: p.short for p in GPU_PROFILES.values()} | {p: p for p in GPU_PROFILES}
CLUSTER_MODES = ("standard", "autopilot")
# Managed Lustre's tiers (MB/s per TiB) -> (smallest GiB, step GiB, up to GiB, step beyond that GiB, largest GiB):
# the "Performance tiers" page of the Managed Lustre docs (gcloud 528's --capacity-gib help is older, tier-blind).
LUSTRE_TIERS = {
    1000: (9_000, 9_000, 1_530_000, 72_000, 10_008_000),
    500: (18_000, 18_000, 3_060_000, 144_000, 20_016_000),
    250: (36_000, 36_000, 6_120_000, 288_000, 40_032_000),
    125: (72_000, 72_000, 12_240_000, 72_000, 12_240_000),
}
LUSTRE_THROUGHPUTS = tuple(sorted(LUSTRE_TIERS))
# NeMo RL image tag -> the Ray version inside it (the RayCluster's rayVersion must match).
RAY_VERSIONS = {"v0.5.0": "2.49.2"}

SECRET_KEYS = ("HF_TOKEN", "WANDB_API_KEY")

# Whole numbers: at most 9 digits; a longer one is refused before int() (Python's int-string limit raises
# ValueError past 4300 digits, and no setting here is anywhere near a billion).
_WHOLE = re.compile(r"^[0-9]{1,9}$", re.ASCII)
# The NCCL RDMA installer (FACTS §7): a master commit holding both nccl-rdma-installer.yaml and
# nccl-rdma-installer-autopilot.yaml (the latest change to the former; `doctor` checks both URLs answer).
NCCL_INSTALLER_DEFAULT_REF = "2da1c92ff7bd772a2c833710bb6c21dcfe6dfaae"
# PREFETCH_MODELS unset: the model of the tutorial's job, jobs/gemma3-gsm8k.yaml (the first job the README runs;
# tests/unit/test_prefetch.py keeps the two equal). Hugging Face repo ids: owner/name, each part 1-96 of [A-Za-z0-9_.-]
# starting and ending with a letter, digit or underscore (huggingface_hub's rule; "--" and ".." are refused too).
DEFAULT_PREFETCH_MODELS = "google/gemma-3-27b-it"
# .env.example's PROJECT_ID: a real run never uses it (tests/unit/test_settings.py keeps the two equal).
PLACEHOLDER_PROJECT_ID = "my-nemo-project"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@dataclass(frozen=True)
class Settings:
    PROJECT_ID: str
    CONTROL_PLANE_LOCATION: str
    NODE_LOCATION: str
    CLUSTER_NAME: str
    GPU_TYPE: str = "b200"
    CLUSTER_MODE: str = "standard"
    GKE_VERSION: str = ""
    KSA_NAME: str = "generic-ksa"
    NAMESPACE: str = "default"
    GS_BUCKET: str = ""
    GS_BUCKET_EXISTING: bool = False  # GS_BUCKET is the user's own bucket: used, never deleted (no managed-by label)
    HF_TOKEN: str = field(default="", repr=False)
    WANDB_API_KEY: str = field(default="", repr=False)
    GVNIC_NETWORK_PREFIX: str = "nemo-gvnic"
    RDMA_NETWORK_PREFIX: str = "nemo-rdma"
    NETWORK: str = "default"
    RESERVATION: str = ""
    SPOT: bool = False
    GPU_NODES: int = 2
    LUSTRE_NAME: str = "nemo-lustre"
    LUSTRE_ZONE: str = ""
    LUSTRE_CAPACITY_GIB: int = 18000
    LUSTRE_THROUGHPUT: int = 500
    NEMO_RL_IMAGE: str = "nvcr.io/nvidia/nemo-rl:v0.5.0"
    PROJECT_NUMBER: str = ""
    RAY_VERSION: str = ""
    NCCL_INSTALLER_REF: str = NCCL_INSTALLER_DEFAULT_REF
    PREFETCH_MODELS: str = DEFAULT_PREFETCH_MODELS  # comma-separated; "" = no prefetch Job
    # Where the values came from, for messages ("using .env.example").
    source: str = field(default="", compare=False)

    # ---- derived -------------------------------------------------------------------------------
    @property
    def gpu(self) -> GpuProfile:
        return GPU_PROFILES[GPU_ALIASES[self.GPU_TYPE]]

    @property
    def region(self) -> str:
        return self.CONTROL_PLANE_LOCATION

    @property
    def zone(self) -> str:
        return self.NODE_LOCATION

    @property
    def lustre_zone(self) -> str:
        return self.LUSTRE_ZONE or self.NODE_LOCATION

    @property
    def bucket(self) -> str:
        return self.GS_BUCKET or f"nemo-rl-{self.PROJECT_ID}"

    @property
    def autopilot(self) -> bool:
        return self.CLUSTER_MODE == "autopilot"

    @property
    def kube_context(self) -> str:
        # The context name `gcloud container clusters get-credentials` writes; naming it on every kubectl
        # and helm call means a stale current-context can never point our applies at another cluster.
        return f"gke_{self.PROJECT_ID}_{self.CONTROL_PLANE_LOCATION}_{self.CLUSTER_NAME}"

    @property
    def ray_version(self) -> str:
        if self.RAY_VERSION:
            return self.RAY_VERSION
        return RAY_VERSIONS[self.NEMO_RL_IMAGE.rsplit(":", 1)[-1]]

    @property
    def secrets(self) -> tuple[str, ...]:
        return tuple(v for v in (self.HF_TOKEN, self.WANDB_API_KEY) if v)

    def with_overrides(self, **overrides: object) -> Settings:
        """Flags override the file and the environment; None means 'flag not given'."""
        given = {k: v for k, v in overrides.items() if v is not None}
        return validate(replace(self, **as_fields(coerce(given))))


KEYS = tuple(f.name for f in fields(Settings) if f.name != "source")
REQUIRED = ("PROJECT_ID", "CONTROL_PLANE_LOCATION", "NODE_LOCATION", "CLUSTER_NAME")


def _bool(key: str, raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigError(key, raw, "use true or false.")


def _int(key: str, raw: object) -> int:
    if isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    text = str(raw).strip()
    if not _WHOLE.fullmatch(text):
        if re.fullmatch(r"[0-9]{10,}", text, re.ASCII):
            raise ConfigError(key, raw, "far too large: use a whole number, like 2.")
        raise ConfigError(key, raw, "use a whole number (digits 0-9 only), like 2.")
    return int(text)


# A setting's value once coerced: the type its field declares (str, int or bool).
Value = str | int | bool


def coerce(values: Mapping[str, object]) -> dict[str, Value]:
    """Raw strings (from .env or flags) -> typed values. Unknown keys are ignored by the caller."""
    out: dict[str, Value] = {}
    for key, raw in values.items():
        kind = Settings.__dataclass_fields__[key].type
        if kind == "bool":
            out[key] = _bool(key, raw)
        elif kind == "int":
            out[key] = _int(key, raw)
        else:
            out[key] = str(raw).strip()
    if "GPU_TYPE" in out:
        out["GPU_TYPE"] = str(out["GPU_TYPE"]).lower()
    if "CLUSTER_MODE" in out:
        out["CLUSTER_MODE"] = str(out["CLUSTER_MODE"]).lower()
    return out


def as_fields(values: Mapping[str, Value]) -> dict[str, Any]:
    """Coerced values as Settings keyword arguments. coerce() gave each value its field's declared type;
    mypy cannot follow a key held in a variable to its field, so the seam is typed loosely here, once."""
    return dict(values)


def validate(s: Settings) -> Settings:
    """Check every value (the rules: validation.py); return the settings unchanged or raise ConfigError for the
    first bad key."""
    from .validation import check_all  # it reads this module's constants: imported when first used

    check_all(s)
    return s


def load(*, allow_example: bool, environ: dict[str, str] | None = None, cwd: Path | None = None,
         warn: Callable[[str], None] | None = None, **overrides: object) -> Settings:
    """Read the settings file, apply the environment and the flags, validate.

    allow_example: dry runs and offline tasks may fall back to .env.example; real runs may not, so that
    nothing is ever created in a placeholder project (nor with ENV_FILE pointing at the example). warn: where
    a warning about the file goes (default: stderr, each once per process).
    """
    from .envfile import find_env_file, read_env_file, warn_once  # they read this module's keys

    environ = dict(os.environ if environ is None else environ)
    cwd = cwd or Path.cwd()
    path, is_example = find_env_file(environ, cwd)
    if is_example and not allow_example:
        raise ConfigError(".env", "", "no .env found. Copy .env.example to .env and set your PROJECT_ID, locations and"
                                      " names (or point ENV_FILE at a settings file); real runs never use the example.")
    raw: dict[str, object] = {}
    if path is not None:
        raw.update(read_env_file(path, warn=warn or warn_once))
    raw.update({k: v for k, v in environ.items() if k in KEYS})
    source = f"{path.name} (placeholder values)" if is_example and path else (str(path) if path else "environment")
    base = Settings(**as_fields({"PROJECT_ID": "", "CONTROL_PLANE_LOCATION": "", "NODE_LOCATION": "",
                                 "CLUSTER_NAME": "", **coerce(raw), "source": source}))
    loaded = base.with_overrides(**overrides)
    if environ.get("ENV_FILE") and not allow_example and loaded.PROJECT_ID == PLACEHOLDER_PROJECT_ID:
        raise ConfigError("ENV_FILE", environ["ENV_FILE"],
                          f"its PROJECT_ID is {PLACEHOLDER_PROJECT_ID}, the placeholder of .env.example; real runs "
                          f"never use it. Set your own PROJECT_ID in that file (or in .env).")
    return loaded
