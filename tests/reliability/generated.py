"""Hypothesis strategies for settings values and job overrides: valid ones and ones that must be refused.

Each strategy yields the override dict to apply to the example settings (one key changes; a key that is
only valid together with another, such as a region and its zone, brings that one along) and, for the
invalid ones, the key whose ConfigError is expected. Invalid values are built to break the rule in a way
that survives the settings' own normalisation (strip, lower-case), so no oracle regex is re-implemented.
"""

from __future__ import annotations

import string

from hypothesis import strategies as st

from nemo_rl_gke import settings as S
from nemo_rl_gke import validation as V
from support.fake import TEST_HF_TOKEN, TEST_WANDB_KEY, read_env_example

LOWER = string.ascii_lowercase
NAME_CHARS = LOWER + string.digits + "-"
# Characters no GCE/Kubernetes name, zone, region or project ID may hold, in the middle of a value.
BAD_NAME_CHARS = "AZ_/@!:. é\"'$;\\"
BOOL_WORDS = sorted(S._TRUE | S._FALSE)


def name(max_len: int, *, first: str = LOWER) -> st.SearchStrategy[str]:
    """A name: a letter, then [a-z0-9-], not ending with '-'."""
    def build(head: str, middle: str, tail: str) -> str:
        return (head + middle + tail)[:max_len] if max_len > 1 else head

    return st.builds(build, st.sampled_from(first), st.text(NAME_CHARS, max_size=max(0, max_len - 2)),
                     st.sampled_from(LOWER + string.digits)).filter(lambda v: not v.endswith("-"))


def spoil(valid: st.SearchStrategy[str], extra: str = "") -> st.SearchStrategy[str]:
    """A valid value with a forbidden character put strictly inside it (strip() cannot remove it)."""
    @st.composite
    def build(draw) -> str:
        value = draw(valid.filter(lambda v: len(v) >= 2))
        bad = draw(st.sampled_from(BAD_NAME_CHARS + extra))
        at = draw(st.integers(1, len(value) - 1))
        return value[:at] + bad + value[at:]

    return build()


def too_long(limit: int) -> st.SearchStrategy[str]:
    return st.builds(lambda head, n: head + "a" * n, st.sampled_from(LOWER), st.integers(limit, limit + 40))


def base() -> S.Settings:
    values = {k: v for k, v in read_env_example().items() if k in S.KEYS}
    values.update(HF_TOKEN=TEST_HF_TOKEN, WANDB_API_KEY=TEST_WANDB_KEY)
    return S.Settings(**S.coerce(values)).with_overrides()


def commands(s: S.Settings) -> list[list[str]]:
    """Every argv our steps and builders make from these settings (what reaches gcloud/kubectl/helm)."""
    from nemo_rl_gke import names
    from nemo_rl_gke.commands import buckets, gcloud, helm, kubectl, lustre

    out = [gcloud.network_create(s, s.NETWORK, subnet_mode="auto"), gcloud.firewall_create(s),
           gcloud.cluster_create(s), gcloud.get_credentials(s), gcloud.cluster_delete(s),
           gcloud.subnet_create(s, names.gvnic_subnet(s), network=names.gvnic_network(s),
                                ip_range=names.GVNIC_RANGE),
           lustre.range_create(s), lustre.peering_connect(s), lustre.lustre_create(s), lustre.lustre_delete(s),
           buckets.bucket_create_equivalent(s), buckets.binding_add_equivalent(s, "123456"),
           kubectl.apply_stdin(s), helm.status(s)]
    if not s.autopilot:
        out.append(gcloud.node_pool_create(s))
    return out


region = st.builds(lambda a, b, n: f"{a}-{b}{n}", st.text(LOWER, min_size=2, max_size=8),
                   st.text(LOWER, min_size=3, max_size=10), st.integers(1, 12))
zone_letter = st.sampled_from(LOWER)
gke_ok = st.builds(lambda minor, patch, build: f"1.{minor}.{patch}-gke.{build}", st.integers(33, 40),
                   st.integers(0, 20), st.integers(1, 9_999_999))
image_ok = st.builds(lambda host, path: f"{host}/{path}:v0.5.0", st.sampled_from(["nvcr.io", "us-docker.pkg.dev",
                                                                                  "localhost:5000"]),
                     st.lists(name(20), min_size=1, max_size=3).map("/".join))
# Token-like: a fixed head keeps a short generated token from being a word our commands hold ("descript").
secret_ok = st.builds(lambda tail: "tok_" + tail, st.text(string.ascii_letters + string.digits + "_-.", min_size=8,
                                                          max_size=56))
bucket_ok = name(60, first=LOWER + string.digits).filter(lambda b: not b.startswith("goog") and "google" not in b
                                                         and len(b) >= 3)


def _mixed_case(words) -> st.SearchStrategy[str]:
    def flip(word: str, upper: list[bool]) -> str:
        upper = (upper + [False] * len(word))[:len(word)]
        return "".join(c.upper() if u else c for c, u in zip(word, upper, strict=True))

    return st.builds(flip, st.sampled_from(sorted(words)), st.lists(st.booleans(), max_size=40))


def _not_in(allowed, alphabet=string.ascii_letters + string.digits + "-_.") -> st.SearchStrategy[str]:
    folded = {str(a).lower() for a in allowed}
    return st.text(alphabet, min_size=1, max_size=20).filter(lambda t: t.strip().lower() not in folded)


def _digits_not(predicate) -> st.SearchStrategy[str]:
    return st.integers(0, 10_000_000).filter(predicate).map(str)


def _not_digits() -> st.SearchStrategy[str]:
    return st.text(string.ascii_letters + string.digits + "-.+ ,", min_size=1, max_size=12).filter(
        lambda t: not t.strip().isdigit())


BASE_REGION = "us-central1"
# Managed Lustre's sizes at the .env.example's tier (500 MB/s per TiB, the docs' "Performance tiers"): multiples of
# 18000 GiB up to 3060000, of 144000 GiB beyond, up to 20016000.
LUSTRE_STEP, LUSTRE_UP_TO, LUSTRE_THEN, LUSTRE_MAX = 18_000, 3_060_000, 144_000, 20_016_000
# Each tier's smallest size.
LUSTRE_SMALLEST = {"1000": 9000, "500": 18000, "250": 36000, "125": 72000}


def _lustre_fits(n: int) -> bool:
    return 0 < n <= LUSTRE_MAX and not n % (LUSTRE_STEP if n <= LUSTRE_UP_TO else LUSTRE_THEN)


# Hugging Face repo ids: owner/name, each part [A-Za-z0-9_.-] starting and ending with a letter, digit or '_'.
hf_part = st.builds(lambda head, middle, tail: head + middle + tail,
                    st.sampled_from(string.ascii_letters + string.digits + "_"),
                    st.text(string.ascii_letters + string.digits + "_.-", max_size=20),
                    st.sampled_from(string.ascii_letters + string.digits + "_")).filter(
    lambda v: "--" not in v and ".." not in v)
hf_repo = st.builds(lambda owner, model: f"{owner}/{model}", hf_part, hf_part)

# key -> strategy of override dicts that are valid
VALID: dict[str, st.SearchStrategy[dict[str, str]]] = {
    "PROJECT_ID": st.builds(lambda v: {"PROJECT_ID": v}, name(30).filter(lambda v: len(v) >= 6)),
    "CONTROL_PLANE_LOCATION": st.builds(lambda r, z: {"CONTROL_PLANE_LOCATION": r, "NODE_LOCATION": f"{r}-{z}"},
                                        region, zone_letter),
    "NODE_LOCATION": st.builds(lambda z: {"NODE_LOCATION": f"{BASE_REGION}-{z}"}, zone_letter),
    "CLUSTER_NAME": st.builds(lambda v: {"CLUSTER_NAME": v}, name(40)),
    "GPU_TYPE": st.builds(lambda v: {"GPU_TYPE": v}, _mixed_case(S.GPU_ALIASES)),
    "CLUSTER_MODE": st.builds(lambda v: {"CLUSTER_MODE": v}, _mixed_case(S.CLUSTER_MODES)),
    "GKE_VERSION": st.builds(lambda v: {"GKE_VERSION": v}, st.one_of(st.just(""), gke_ok)),
    "KSA_NAME": st.builds(lambda v: {"KSA_NAME": v}, name(63, first=LOWER + string.digits)),
    "NAMESPACE": st.builds(lambda v: {"NAMESPACE": v}, name(63, first=LOWER + string.digits)),
    "GS_BUCKET": st.builds(lambda v: {"GS_BUCKET": v}, bucket_ok),
    "HF_TOKEN": st.builds(lambda v: {"HF_TOKEN": v}, st.one_of(st.just(""), secret_ok)),
    "WANDB_API_KEY": st.builds(lambda v: {"WANDB_API_KEY": v}, st.one_of(st.just(""), secret_ok)),
    "GVNIC_NETWORK_PREFIX": st.builds(lambda v: {"GVNIC_NETWORK_PREFIX": v},
                                      name(54).filter(lambda v: v != "nemo-rdma")),
    "RDMA_NETWORK_PREFIX": st.builds(lambda v: {"RDMA_NETWORK_PREFIX": v},
                                     name(57).filter(lambda v: v != "nemo-gvnic")),
    "NETWORK": st.builds(lambda v: {"NETWORK": v}, name(63)),
    "RESERVATION": st.builds(lambda v: {"RESERVATION": v, "SPOT": "false"}, name(63)),
    "SPOT": st.builds(lambda v: {"SPOT": v}, _mixed_case(BOOL_WORDS)),
    "GPU_NODES": st.builds(lambda v: {"GPU_NODES": str(v)}, st.integers(1, 64)),
    "LUSTRE_NAME": st.builds(lambda v: {"LUSTRE_NAME": v}, name(57)),
    "LUSTRE_ZONE": st.builds(lambda z: {"LUSTRE_ZONE": z}, st.one_of(
        st.just(""), zone_letter.map(lambda z: f"{BASE_REGION}-{z}"))),
    "LUSTRE_CAPACITY_GIB": st.one_of(
        st.builds(lambda k: {"LUSTRE_CAPACITY_GIB": str(LUSTRE_STEP * k)}, st.integers(1, LUSTRE_UP_TO // LUSTRE_STEP)),
        st.builds(lambda k: {"LUSTRE_CAPACITY_GIB": str(LUSTRE_THEN * k)},
                  st.integers(LUSTRE_UP_TO // LUSTRE_THEN + 1, LUSTRE_MAX // LUSTRE_THEN))),
    # A tier brings a size it takes (below each tier's threshold, its smallest size is its step).
    "LUSTRE_THROUGHPUT": st.builds(
        lambda v, k: {"LUSTRE_THROUGHPUT": v, "LUSTRE_CAPACITY_GIB": str(LUSTRE_SMALLEST[v] * k)},
        st.sampled_from(sorted(LUSTRE_SMALLEST)), st.integers(1, 20)),
    "NEMO_RL_IMAGE": st.builds(lambda v: {"NEMO_RL_IMAGE": v}, image_ok),
    "PROJECT_NUMBER": st.builds(lambda v: {"PROJECT_NUMBER": v}, st.one_of(
        st.just(""), st.text(string.digits, min_size=6, max_size=20))),
    "RAY_VERSION": st.builds(lambda a, b, c: {"RAY_VERSION": f"{a}.{b}.{c}"}, st.integers(0, 99),
                             st.integers(0, 99), st.integers(0, 99)),
    "GS_BUCKET_EXISTING": st.one_of(st.builds(lambda v: {"GS_BUCKET_EXISTING": v}, _mixed_case(S._FALSE)),
                                    st.builds(lambda v, b: {"GS_BUCKET_EXISTING": v, "GS_BUCKET": b},
                                              _mixed_case(S._TRUE), bucket_ok)),
    "NCCL_INSTALLER_REF": st.builds(lambda v: {"NCCL_INSTALLER_REF": v}, st.one_of(
        st.text("0123456789abcdef", min_size=40, max_size=40), st.just(S.NCCL_INSTALLER_DEFAULT_REF))),
    "PREFETCH_MODELS": st.builds(lambda ids, sep: {"PREFETCH_MODELS": sep.join(ids)},
                                 st.lists(hf_repo, max_size=3), st.sampled_from([",", ", ", " , "])),
}


def _one(key: str, values: st.SearchStrategy[str], **also: str) -> st.SearchStrategy[dict[str, str]]:
    return values.map(lambda v: {key: v, **also})


# key -> strategy of override dicts where exactly that key is wrong
INVALID: dict[str, st.SearchStrategy[dict[str, str]]] = {
    "PROJECT_ID": _one("PROJECT_ID", st.one_of(st.just(""), spoil(name(30)), too_long(30),
                                               name(5).filter(lambda v: len(v) < 6),
                                               st.builds(lambda d, v: d + v, st.sampled_from(string.digits),
                                                         name(20)))),
    "CONTROL_PLANE_LOCATION": _one("CONTROL_PLANE_LOCATION", st.one_of(
        st.just(""), spoil(region), st.builds(lambda r, z: f"{r}-{z}", region, zone_letter))),
    "NODE_LOCATION": _one("NODE_LOCATION", st.one_of(
        st.just(""), spoil(st.just(f"{BASE_REGION}-b")),
        st.builds(lambda r, z: f"{r}-{z}", region.filter(lambda r: r != BASE_REGION), zone_letter))),
    "CLUSTER_NAME": _one("CLUSTER_NAME", st.one_of(st.just(""), spoil(name(40)), too_long(40))),
    "GPU_TYPE": _one("GPU_TYPE", _not_in(S.GPU_ALIASES)),
    "CLUSTER_MODE": _one("CLUSTER_MODE", _not_in(S.CLUSTER_MODES)),
    "GKE_VERSION": _one("GKE_VERSION", st.one_of(
        st.builds(lambda m, p: f"1.{m}.{p}-gke.1", st.integers(10, 31), st.integers(0, 9)),  # older than B200's
        _not_in([], string.ascii_letters + string.digits + ".-").filter(
            lambda t: not V._GKE_VERSION.match(t.strip()) and t.strip()))),
    "KSA_NAME": _one("KSA_NAME", st.one_of(st.just(""), spoil(name(63)), too_long(63))),
    "NAMESPACE": _one("NAMESPACE", st.one_of(st.just(""), spoil(name(63)), too_long(63))),
    "GS_BUCKET": _one("GS_BUCKET", st.one_of(spoil(bucket_ok, extra="").filter(lambda v: not set(v) & set("._")),
                                             st.builds(lambda v: "goog" + v, name(20)),
                                             st.builds(lambda a, b: f"{a}google{b}", name(10), name(10)),
                                             too_long(63))),
    "HF_TOKEN": _one("HF_TOKEN", st.one_of(st.text(string.ascii_letters, min_size=1, max_size=7),
                                           st.builds(lambda a, b: f"{a} {b}", secret_ok, secret_ok))),
    "WANDB_API_KEY": _one("WANDB_API_KEY", st.one_of(st.text(string.ascii_letters, min_size=1, max_size=7),
                                                     st.builds(lambda a, b: f"{a}\t{b}", secret_ok, secret_ok))),
    "GVNIC_NETWORK_PREFIX": _one("GVNIC_NETWORK_PREFIX", st.one_of(st.just(""), spoil(name(54)), too_long(55))),
    "RDMA_NETWORK_PREFIX": _one("RDMA_NETWORK_PREFIX", st.one_of(st.just(""), spoil(name(57)), too_long(58),
                                                                 st.just("nemo-gvnic"))),
    "NETWORK": _one("NETWORK", st.one_of(st.just(""), spoil(name(63)), too_long(64))),
    "RESERVATION": _one("RESERVATION", spoil(name(63)), SPOT="false"),
    "SPOT": st.one_of(_one("SPOT", _not_in(BOOL_WORDS)),
                      st.builds(lambda r: {"RESERVATION": r, "SPOT": "true"}, name(30))),
    "GPU_NODES": _one("GPU_NODES", st.one_of(_not_digits(), st.just("0"), _digits_not(lambda n: n > 64))),
    "LUSTRE_NAME": _one("LUSTRE_NAME", st.one_of(st.just(""), spoil(name(57)), too_long(58))),
    "LUSTRE_ZONE": _one("LUSTRE_ZONE", st.one_of(
        spoil(st.just(f"{BASE_REGION}-b")),
        st.builds(lambda r, z: f"{r}-{z}", region.filter(lambda r: r != BASE_REGION), zone_letter))),
    "LUSTRE_CAPACITY_GIB": _one("LUSTRE_CAPACITY_GIB", st.one_of(
        _not_digits(), _digits_not(lambda n: not _lustre_fits(n)))),
    "LUSTRE_THROUGHPUT": _one("LUSTRE_THROUGHPUT", st.one_of(
        _not_digits(), _digits_not(lambda n: n not in S.LUSTRE_THROUGHPUTS))),
    "NEMO_RL_IMAGE": _one("NEMO_RL_IMAGE", st.one_of(
        st.just(""), image_ok.map(lambda i: i.rsplit(":", 1)[0]),  # no tag
        image_ok.map(lambda i: i.replace("v0.5.0", "v9.9.9")),  # unknown tag, no RAY_VERSION
        spoil(image_ok).filter(lambda i: not V._IMAGE.match(i)))),
    "PROJECT_NUMBER": _one("PROJECT_NUMBER", st.one_of(st.text(string.digits, min_size=1, max_size=5),
                                                       spoil(st.text(string.digits, min_size=6, max_size=12)))),
    "RAY_VERSION": _one("RAY_VERSION", st.text(string.ascii_letters + string.digits + ".", min_size=1,
                                               max_size=10).filter(
        lambda t: not __import__("re").fullmatch(r"[0-9]+\.[0-9]+\.[0-9]+", t))),
    "GS_BUCKET_EXISTING": st.one_of(_one("GS_BUCKET_EXISTING", _not_in(BOOL_WORDS)),
                                    st.builds(lambda v: {"GS_BUCKET_EXISTING": v, "GS_BUCKET": ""},
                                              _mixed_case(S._TRUE))),
    "NCCL_INSTALLER_REF": _one("NCCL_INSTALLER_REF", st.one_of(
        st.just(""), spoil(st.text("0123456789abcdef", min_size=40, max_size=40), extra="/?#%"),
        st.text("0123456789abcdef", max_size=39), st.sampled_from(["master", "HEAD", "v1.1.1"]))),
    "PREFETCH_MODELS": _one("PREFETCH_MODELS", st.one_of(
        hf_part, st.builds(lambda a, b, c: f"{a}/{b}/{c}", hf_part, hf_part, hf_part),  # no owner; a path
        st.builds(lambda a, b, bad: f"{a}/{b[:1]}{bad}{b[1:]}x", hf_part, hf_part, st.sampled_from(" @!:é\"'$;\\+~/")),
        st.builds(lambda a, b, bad: f"{a}/{b[:1]}{bad}{b}", hf_part, hf_part, st.sampled_from(["--", ".."])),
        st.builds(lambda a, b: f"{a},,{b}", hf_repo, hf_repo), st.builds(lambda a: f"{a},", hf_repo),
        st.builds(lambda a: f"{a}/" + "x" * 97, hf_part))),
}


# ---- job overrides (--set) -----------------------------------------------------------------------------------
dotted_key = st.lists(st.text(string.ascii_lowercase + "_", min_size=1, max_size=12).filter(
    lambda w: w[0] != "_" or len(w) > 1), min_size=1, max_size=4).map(".".join)
override_value = st.text(string.ascii_letters + string.digits + "._-/:[],'\" ", max_size=30)
valid_override = st.builds(lambda p, k, v: f"{p}{k}={v}", st.sampled_from(["", "+", "++"]), dotted_key,
                           override_value)
invalid_override = st.one_of(
    dotted_key,  # no '='
    st.builds(lambda k, v: f"{k}={v}", st.sampled_from(["", "=", ".a", "1abc", "-x", "a..b", "a b", "+++a"]),
              override_value),
    st.builds(lambda k, v: f"{k}=\n{v}", dotted_key, override_value),  # a second line
    st.builds(lambda k, v: f"{k}=\0{v}", dotted_key, override_value),
)


# Keys that can change together without making each other invalid (a region brings its own zone, a Lustre tier its
# size: the capacity alone is not among them).
INDEPENDENT = ("PROJECT_ID", "CONTROL_PLANE_LOCATION", "CLUSTER_NAME", "GPU_TYPE", "CLUSTER_MODE", "GKE_VERSION",
               "GS_BUCKET", "GVNIC_NETWORK_PREFIX", "RDMA_NETWORK_PREFIX", "NETWORK", "RESERVATION", "GPU_NODES",
               "LUSTRE_NAME", "LUSTRE_THROUGHPUT", "KSA_NAME", "NAMESPACE")


@st.composite
def valid_settings(draw) -> S.Settings:
    """Settings with several keys changed at once to generated valid values."""
    keys = draw(st.lists(st.sampled_from(INDEPENDENT), min_size=3, max_size=8, unique=True))
    overrides: dict[str, str] = {}
    for key in keys:
        overrides.update(draw(VALID[key]))
    try:
        return base().with_overrides(**overrides)
    except S.ConfigError:
        from hypothesis import assume

        assume(False)
        raise
