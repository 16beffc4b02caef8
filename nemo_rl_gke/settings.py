""".env -> frozen Settings, GPU profiles, and validation with fix-it messages.

Precedence, lowest first: the `.env` file (or `ENV_FILE`), the process environment, then task flags.
Every value is validated before anything runs; a bad one raises `ConfigError` naming the key, the value
and the fix, which the task layer turns into exit code 2.
"""

from __future__ import annotations

import difflib
import io
import os
import re
import sys
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
LUSTRE_THROUGHPUTS = (125, 250, 500, 1000)
# NeMo RL image tag -> the Ray version inside it (the RayCluster's rayVersion must match).
RAY_VERSIONS = {"v0.5.0": "2.49.2"}

SECRET_KEYS = ("HF_TOKEN", "WANDB_API_KEY")

# Naming rules. ASCII only (re.ASCII, explicit [0-9]): `\d` would accept other scripts' digits, which
# gcloud and the APIs refuse. validate() uses fullmatch, so a trailing newline never slips past `$`.
_GCE_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$", re.ASCII)
_PROJECT_ID = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$", re.ASCII)
_REGION = re.compile(r"^[a-z]+-[a-z]+[0-9]+$", re.ASCII)
_ZONE = re.compile(r"^([a-z]+-[a-z]+[0-9]+)-[a-z]$", re.ASCII)
_CLUSTER = re.compile(r"^[a-z]([-a-z0-9]{0,38}[a-z0-9])?$", re.ASCII)
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$", re.ASCII)
# Cloud Storage bucket names (cloud.google.com/storage/docs/buckets#naming): [a-z0-9_.-], starting and
# ending with a letter or digit; 3-63 characters, or up to 222 with dots, each dot-separated part at most
# 63; not an IP address in dotted-decimal form; not starting with "goog"; not containing "google" or a close
# misspelling of it.
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9_.-]{1,220}[a-z0-9]$", re.ASCII)
_BUCKET_IP = re.compile(r"^[0-9]{1,3}(\.[0-9]{1,3}){3}$", re.ASCII)
_BUCKET_GOOGLE = re.compile(r"g[o0]{2}g[l1]e", re.ASCII)
_GKE_VERSION = re.compile(r"^([0-9]{1,4})\.([0-9]{1,4})\.([0-9]{1,4})-gke\.([0-9]{1,12})$", re.ASCII)
_IMAGE = re.compile(r"^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._-]+)+(:[A-Za-z0-9._-]{1,128}|@sha256:[0-9a-f]{64})$",
                    re.ASCII)
_RESERVATION = re.compile(r"^([a-z]([-a-z0-9]{0,61}[a-z0-9])?|projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/reservations/"
                          r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?(/reservationBlocks/[a-z0-9-]+)?)$", re.ASCII)
_PROJECT_NUMBER = re.compile(r"^[0-9]{6,20}$", re.ASCII)
# A full commit of GoogleCloudPlatform/container-engine-accelerators: a branch name would move under us.
_GIT_REF = re.compile(r"^[0-9a-f]{40}$", re.ASCII)
_RAY_VERSION = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+$", re.ASCII)
_SECRET = re.compile(r"^[\x21-\x7e]{8,}$", re.ASCII)  # printable ASCII, no whitespace (it goes in HTTP headers)
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
_HF_PART = r"[A-Za-z0-9_]([A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?"
_HF_REPO = re.compile(rf"^{_HF_PART}/{_HF_PART}$", re.ASCII)
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


def _version_tuple(version: str) -> tuple[int, ...]:
    match = _GKE_VERSION.fullmatch(version)
    assert match, version
    return tuple(int(g) for g in match.groups())


def _gce_name(key: str, value: str, suffix_len: int = 0, example: str = "nemo-net") -> None:
    if not _GCE_NAME.fullmatch(value) or len(value) + suffix_len > 63:
        room = 63 - suffix_len
        raise ConfigError(key, value, f"use lowercase letters, digits and hyphens, starting with a letter, at most "
                                      f"{room} characters (e.g. {example}).")


def validate(s: Settings) -> Settings:
    """Check every value; return the settings unchanged or raise ConfigError for the first bad key."""
    for check in (_check_locations, _check_cluster, _check_bucket_and_secrets, _check_networks,
                  _check_capacity, _check_image_and_refs, _check_prefetch):
        check(s)
    return s


def _check_locations(s: Settings) -> None:
    for key in REQUIRED:
        if not getattr(s, key):
            raise ConfigError(key, "", f"set {key} in .env (see .env.example).")
    if not _PROJECT_ID.fullmatch(s.PROJECT_ID):
        raise ConfigError("PROJECT_ID", s.PROJECT_ID, "a project ID has 6-30 lowercase letters, digits or hyphens, "
                                                      "starts with a letter and does not end with a hyphen.")
    if not _REGION.fullmatch(s.CONTROL_PLANE_LOCATION):
        raise ConfigError("CONTROL_PLANE_LOCATION", s.CONTROL_PLANE_LOCATION,
                          "use a region such as us-central1 (not a zone).")
    for key in ("NODE_LOCATION", "LUSTRE_ZONE"):
        value = getattr(s, key)
        if key == "LUSTRE_ZONE" and not value:
            continue
        match = _ZONE.fullmatch(value)
        if not match:
            raise ConfigError(key, value, f"use a zone such as {s.CONTROL_PLANE_LOCATION}-b.")
        if match.group(1) != s.CONTROL_PLANE_LOCATION:
            raise ConfigError(key, value, f"the zone must be inside CONTROL_PLANE_LOCATION={s.CONTROL_PLANE_LOCATION}"
                                          f" (e.g. {s.CONTROL_PLANE_LOCATION}-b).")


def _check_cluster(s: Settings) -> None:
    if not _CLUSTER.fullmatch(s.CLUSTER_NAME):
        raise ConfigError("CLUSTER_NAME", s.CLUSTER_NAME, "use 1-40 lowercase letters, digits or hyphens, starting "
                                                          "with a letter (e.g. nemo-rl).")
    if s.GPU_TYPE not in GPU_ALIASES:
        allowed = ", ".join(sorted(GPU_ALIASES))
        raise ConfigError("GPU_TYPE", s.GPU_TYPE, f"allowed values: {allowed}.")
    if s.CLUSTER_MODE not in CLUSTER_MODES:
        raise ConfigError("CLUSTER_MODE", s.CLUSTER_MODE, "allowed values: standard, autopilot.")
    if s.GKE_VERSION:
        if not _GKE_VERSION.fullmatch(s.GKE_VERSION):
            raise ConfigError("GKE_VERSION", s.GKE_VERSION, "use a full GKE version like 1.32.2-gke.1422000, or leave "
                                                            "it empty for the release channel's default.")
        if _version_tuple(s.GKE_VERSION) < _version_tuple(s.gpu.min_gke):
            raise ConfigError("GKE_VERSION", s.GKE_VERSION, f"{s.gpu.accelerator} needs GKE {s.gpu.min_gke} or later.")
    for key in ("KSA_NAME", "NAMESPACE"):
        if not _DNS_LABEL.fullmatch(getattr(s, key)):
            raise ConfigError(key, getattr(s, key), "use a Kubernetes name: lowercase letters, digits and hyphens, "
                                                    "at most 63 characters.")


def _check_bucket_and_secrets(s: Settings) -> None:
    problem = bucket_name_problem(s.bucket)
    if problem:
        raise ConfigError("GS_BUCKET", s.bucket, problem)
    if s.GS_BUCKET_EXISTING and not s.GS_BUCKET:
        raise ConfigError("GS_BUCKET_EXISTING", s.GS_BUCKET_EXISTING, "set GS_BUCKET to the name of your own bucket "
                                                                      "as well (or set GS_BUCKET_EXISTING=false).")
    for key in SECRET_KEYS:
        value = getattr(s, key)
        if value and not _SECRET.fullmatch(value):
            # Never echo a secret, not even a wrong one.
            raise ConfigError(key, "***", "the token is too short or has whitespace or non-ASCII characters in it;"
                                          " paste it again.")


def _check_networks(s: Settings) -> None:
    _gce_name("GVNIC_NETWORK_PREFIX", s.GVNIC_NETWORK_PREFIX, len("-internal"), "nemo-gvnic")
    _gce_name("RDMA_NETWORK_PREFIX", s.RDMA_NETWORK_PREFIX, len("-sub-7"), "nemo-rdma")
    if s.GVNIC_NETWORK_PREFIX == s.RDMA_NETWORK_PREFIX:
        raise ConfigError("RDMA_NETWORK_PREFIX", s.RDMA_NETWORK_PREFIX, "must differ from GVNIC_NETWORK_PREFIX.")
    _gce_name("NETWORK", s.NETWORK, 0, "default")
    # Our own networks are <prefix>-net: a main VPC of that name would be created, used and deleted as
    # both, and `down` could never finish.
    for prefix_key in ("GVNIC_NETWORK_PREFIX", "RDMA_NETWORK_PREFIX"):
        if s.NETWORK == f"{getattr(s, prefix_key)}-net":
            raise ConfigError("NETWORK", s.NETWORK, f"that is the name of the network derived from {prefix_key}="
                                                    f"{getattr(s, prefix_key)}; use your main VPC (e.g. default) or "
                                                    f"change {prefix_key}.")
    _gce_name("LUSTRE_NAME", s.LUSTRE_NAME, len("-range"), "nemo-lustre")


def _check_capacity(s: Settings) -> None:
    if s.RESERVATION and not _RESERVATION.fullmatch(s.RESERVATION):
        raise ConfigError("RESERVATION", s.RESERVATION, "use a reservation name, or "
                                                        "projects/PROJECT/reservations/NAME for a shared one.")
    if s.RESERVATION and s.SPOT:
        raise ConfigError("SPOT", s.SPOT, "SPOT and RESERVATION exclude each other: use --spot or "
                                          "--reservation=NAME, not both.")
    if not 1 <= s.GPU_NODES <= 64:
        raise ConfigError("GPU_NODES", s.GPU_NODES, "use 1 to 64 GPU nodes.")
    if s.LUSTRE_THROUGHPUT not in LUSTRE_THROUGHPUTS:
        raise ConfigError("LUSTRE_THROUGHPUT", s.LUSTRE_THROUGHPUT, "allowed values (MB/s per TiB): 125, 250, 500,"
                                                                    " 1000.")
    # gcloud 528's own help for `lustre instances create --capacity-gib`.
    if not 18_000 <= s.LUSTRE_CAPACITY_GIB <= 954_000 or s.LUSTRE_CAPACITY_GIB % 9000:
        raise ConfigError("LUSTRE_CAPACITY_GIB", s.LUSTRE_CAPACITY_GIB,
                          "use a multiple of 9000 GiB from 18000 to 954000 (e.g. 18000).")


def _check_image_and_refs(s: Settings) -> None:
    if not _IMAGE.fullmatch(s.NEMO_RL_IMAGE):
        raise ConfigError("NEMO_RL_IMAGE", s.NEMO_RL_IMAGE, "use a full image reference with a tag, like "
                                                            "nvcr.io/nvidia/nemo-rl:v0.5.0.")
    if s.RAY_VERSION:
        if not _RAY_VERSION.fullmatch(s.RAY_VERSION):
            raise ConfigError("RAY_VERSION", s.RAY_VERSION, "use the Ray version inside the image, like 2.49.2.")
    elif s.NEMO_RL_IMAGE.rsplit(":", 1)[-1] not in RAY_VERSIONS:
        known = ", ".join(RAY_VERSIONS)
        raise ConfigError("NEMO_RL_IMAGE", s.NEMO_RL_IMAGE, f"the Ray version of this image is unknown (known tags: "
                                                            f"{known}); set RAY_VERSION to the image's Ray version.")
    if s.PROJECT_NUMBER and not _PROJECT_NUMBER.fullmatch(s.PROJECT_NUMBER):
        raise ConfigError("PROJECT_NUMBER", s.PROJECT_NUMBER, "the project number is all digits; leave it empty to "
                                                              "look it up.")
    if not _GIT_REF.fullmatch(s.NCCL_INSTALLER_REF):
        raise ConfigError("NCCL_INSTALLER_REF", s.NCCL_INSTALLER_REF,
                          f"use a full commit (40 hex digits) of GoogleCloudPlatform/container-engine-accelerators"
                          f" that has gpudirect-rdma/nccl-rdma-installer*.yaml (default "
                          f"{NCCL_INSTALLER_DEFAULT_REF}).")


def _check_prefetch(s: Settings) -> None:
    for repo in s.PREFETCH_MODELS.split(",") if s.PREFETCH_MODELS else ():
        if not _HF_REPO.fullmatch(repo.strip()) or "--" in repo or ".." in repo:
            raise ConfigError("PREFETCH_MODELS", s.PREFETCH_MODELS,
                              f"{shown_value(repo.strip())} is not a Hugging Face model id: list owner/name ids "
                              f"separated by commas (e.g. {DEFAULT_PREFETCH_MODELS},Qwen/Qwen2.5-1.5B), or leave "
                              f"it empty for no prefetch.")


def bucket_name_problem(name: str) -> str:
    """What breaks Cloud Storage's bucket naming rules, or "" (cloud.google.com/storage/docs/buckets#naming)."""
    rules = ("a bucket name has 3-63 lowercase letters, digits, '-', '_' or '.' (up to 222 with dots, each "
             "dot-separated part at most 63), and starts and ends with a letter or digit")
    if not _BUCKET.fullmatch(name):
        return rules + "."
    parts = name.split(".")
    if "." not in name and len(name) > 63:
        return rules + "."
    if any(not part or len(part) > 63 for part in parts):
        return rules + "."
    if _BUCKET_IP.fullmatch(name):
        return "a bucket name may not be an IP address (like 192.168.5.4)."
    if name.startswith("goog") or _BUCKET_GOOGLE.search(name):
        return "a bucket name may not start with 'goog' or contain 'google' (or a look-alike such as 'g00gle')."
    return ""


def project_root(cwd: Path) -> Path | None:
    """The nearest directory, from cwd upward, holding tasks.py: where Invoke finds its tasks, and where
    .env lives. None when cwd is outside the project (e.g. `invoke --search-root` from elsewhere)."""
    for base in (cwd, *cwd.parents):
        if (base / "tasks.py").is_file():
            return base
    return None


def _upward(cwd: Path, root: Path | None) -> list[Path]:
    """cwd, then each parent up to the project root (inclusive); only cwd outside a project."""
    if root is None:
        return [cwd]
    out = [cwd]
    for base in cwd.parents:
        if out[-1] == root:
            break
        out.append(base)
    return out


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except (OSError, ValueError):  # a name too long for the file system, a NUL byte
        return False


def _find_env_file(environ: dict[str, str], cwd: Path) -> tuple[Path | None, bool]:
    """(path, is_example). ENV_FILE wins; then the first .env from cwd up to the project root (the
    directory holding tasks.py), so `cd manifests && invoke …` reads the project's .env; else .env.example
    (cwd, the project root, then the repository of this package)."""
    chosen = environ.get("ENV_FILE")
    if chosen:
        path = Path(chosen)
        if not path.is_absolute():
            path = cwd / path
        if not _is_file(path):
            raise ConfigError("ENV_FILE", chosen, "no such file; point ENV_FILE at your settings file.")
        return path, False
    root = project_root(cwd)
    for base in _upward(cwd, root):
        if _is_file(base / ".env"):
            return base / ".env", False
    for folder in (cwd, root, REPO_ROOT):
        if folder is not None and _is_file(folder / ".env.example"):
            return folder / ".env.example", True
    return None, True


_LINE_KEY = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.]*)\s*=", re.ASCII)
_WARNED: set[str] = set()  # each unknown-key warning once per process (chained tasks load settings again)


def _warn_once(text: str) -> None:
    if text not in _WARNED:
        _WARNED.add(text)
        print(text, file=sys.stderr)


def read_env_file(path: Path, *, warn: Callable[[str], None] = _warn_once) -> dict[str, str]:
    """The settings of one file, strictly: a line that does not parse is a ConfigError naming the file and
    the line (python-dotenv would only log it and carry on with the default); a key that is not a setting
    is a warning naming the closest one; a file that is not UTF-8 is a ConfigError naming the line."""
    from dotenv import dotenv_values
    from dotenv.parser import parse_stream

    where = str(path) if len(str(path)) <= 200 else "…" + str(path)[-199:]
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError("ENV_FILE", str(path), f"cannot read it ({exc.strerror or exc}).") from None
    try:
        text = data.decode("utf-8-sig")  # a BOM (some Windows editors write one) is not part of the first key
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        shown = data.split(b"\n")[line - 1][:SHOWN_MAX].decode("utf-8", "replace")
        raise ConfigError(f"{path.name} line {line}", shown,
                          f"byte 0x{data[exc.start]:02x} is not UTF-8 text; save {where} as UTF-8.") from None
    for binding in parse_stream(io.StringIO(text)):
        number, original = binding.original.line, binding.original.string
        first = original.splitlines()[0] if original.strip() else original
        if binding.error:
            named = _LINE_KEY.match(first)
            subject = f" (the value of {named.group(1)})" if named else ""
            raise ConfigError(f"{path.name} line {number}", first,
                              f"this line does not parse{subject}: use KEY=value, quotes closed on the same line; "
                              f"fix line {number} of {where}.")
        if binding.key is None:
            continue
        if binding.value is not None and "\n" in binding.value:
            spans = original.count("\n") + (not original.endswith("\n"))
            raise ConfigError(f"{path.name} line {number}", first,
                              f"the quoted value of {binding.key} runs over {spans} lines: a closing quote is "
                              f"missing; fix line {number} of {where}.")
        if binding.key not in KEYS:
            near = difflib.get_close_matches(binding.key.upper(), KEYS, n=1, cutoff=0.6)
            hint = f"did you mean {near[0]}?" if near else "see .env.example for the keys."
            warn(f"warning: {path.name} line {number}: {shown_value(binding.key)} is not a setting and is "
                 f"ignored; {hint}")
    values = dotenv_values(stream=io.StringIO(text))
    return {k: v for k, v in values.items() if k in KEYS and v is not None}


def load(*, allow_example: bool, environ: dict[str, str] | None = None, cwd: Path | None = None,
         warn: Callable[[str], None] = _warn_once, **overrides: object) -> Settings:
    """Read the settings file, apply the environment and the flags, validate.

    allow_example: dry runs and offline tasks may fall back to .env.example; real runs may not, so that
    nothing is ever created in a placeholder project (nor with ENV_FILE pointing at the example).
    """
    environ = dict(os.environ if environ is None else environ)
    cwd = cwd or Path.cwd()
    path, is_example = _find_env_file(environ, cwd)
    if is_example and not allow_example:
        raise ConfigError(".env", "", "no .env found. Copy .env.example to .env and set your PROJECT_ID, locations and"
                                      " names (or point ENV_FILE at a settings file); real runs never use the example.")
    raw: dict[str, object] = {}
    if path is not None:
        raw.update(read_env_file(path, warn=warn))
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
