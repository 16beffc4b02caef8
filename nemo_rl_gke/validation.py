"""The rules every setting follows, checked before anything runs: GCP and Kubernetes naming rules, the zones
inside the region, enums, numbers and references. The first broken one is a ConfigError naming the key, the
value and the fix (settings.validate runs them)."""

from __future__ import annotations

import re

from .settings import (
    CLUSTER_MODES,
    DEFAULT_PREFETCH_MODELS,
    GPU_ALIASES,
    LUSTRE_THROUGHPUTS,
    LUSTRE_TIERS,
    NCCL_INSTALLER_DEFAULT_REF,
    RAY_VERSIONS,
    REQUIRED,
    SECRET_KEYS,
    ConfigError,
    Settings,
    shown_value,
)

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
# Printable ASCII, no whitespace (it goes in HTTP headers), 8 to 512 characters (a Hugging Face token is 37, a
# W&B key 40 to 86): a pasted file or log is not a token.
_SECRET = re.compile(r"^[\x21-\x7e]{8,512}$", re.ASCII)
# Hugging Face repo ids: owner/name (see DEFAULT_PREFETCH_MODELS).
_HF_PART = r"[A-Za-z0-9_]([A-Za-z0-9_.-]{0,94}[A-Za-z0-9_])?"
_HF_REPO = re.compile(rf"^{_HF_PART}/{_HF_PART}$", re.ASCII)


def version_tuple(version: str) -> tuple[int, ...]:
    """A full GKE version's numbers, to compare; () for anything else."""
    match = _GKE_VERSION.fullmatch(version)
    return tuple(int(g) for g in match.groups()) if match else ()


def _gce_name(key: str, value: str, suffix_len: int = 0, example: str = "nemo-net") -> None:
    if not _GCE_NAME.fullmatch(value) or len(value) + suffix_len > 63:
        room = 63 - suffix_len
        raise ConfigError(key, value, f"use lowercase letters, digits and hyphens, starting with a letter, at most "
                                      f"{room} characters (e.g. {example}).")


def check_all(s: Settings) -> None:
    """Every rule, in order: raise ConfigError for the first bad key."""
    for check in (_check_locations, _check_cluster, _check_bucket_and_secrets, _check_networks,
                  _check_capacity, _check_image_and_refs, _check_prefetch):
        check(s)


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
        if version_tuple(s.GKE_VERSION) < version_tuple(s.gpu.min_gke):
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
            raise ConfigError(key, "***", "the token is too short, too long (over 512 characters), or has "
                                          "whitespace or non-ASCII characters in it; paste it again.")


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
    if not lustre_capacity_fits(s.LUSTRE_CAPACITY_GIB, s.LUSTRE_THROUGHPUT):
        low, step, up_to, then, high = LUSTRE_TIERS[s.LUSTRE_THROUGHPUT]
        beyond = f", or a multiple of {then} up to {high}" if high > up_to else ""
        raise ConfigError("LUSTRE_CAPACITY_GIB", s.LUSTRE_CAPACITY_GIB,
                          f"at LUSTRE_THROUGHPUT={s.LUSTRE_THROUGHPUT} Managed Lustre takes a multiple of {step} GiB "
                          f"from {low} to {up_to}{beyond} (e.g. {low}); a faster tier takes smaller instances.")


def lustre_capacity_fits(capacity: int, throughput: int) -> bool:
    """A size Managed Lustre creates at that tier (its minimum, its step, and a coarser step past a threshold)."""
    low, step, up_to, then, high = LUSTRE_TIERS[throughput]
    return low <= capacity <= high and not capacity % (step if capacity <= up_to else then)


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
