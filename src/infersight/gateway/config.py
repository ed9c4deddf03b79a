"""Gateway configuration: a TOML or YAML file, then ``INFERSIGHT_GATEWAY_*`` env, then flags.

A minimal file (TOML)::

    default_deadline_s = 120
    [[upstreams]]
    name = "vllm-a"
    url = "http://10.0.0.5:8000"
    models = ["llama-3-8b"]
    concurrency = 64          # in-flight limit (the start value when adaptive)
    queue = 256               # bounded FIFO queue behind the limit
    limiter = "gradient"      # static | aimd | gradient
    [[upstreams]]
    name = "openai"
    url = "https://api.openai.com"
    models = ["gpt-4o-mini"]
    api_key_env = "OPENAI_API_KEY"   # the key itself never sits in the file
    [fallbacks]
    "llama-3-8b" = ["gpt-4o-mini"]
    [[keys]]
    name = "team-a"
    sha256 = "<hex sha256 of the key>"   # `infersight gateway --hash-key` prints it
    requests_per_minute = 600
    tokens_per_minute = 200000
    max_cost_usd = 500                   # refused (429 insufficient_quota) once spent
    [shared]                             # replicas share limits, spend and breakers
    redis_url = "redis://10.0.0.9:6379/0"   # or INFERSIGHT_GATEWAY_REDIS_URL

The upstream ``url`` is the server root; a trailing ``/v1`` is accepted and removed.
"""

from __future__ import annotations

import hashlib
import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import SettingsConfigDict

from infersight.client import resolve_api_key
from infersight.core.durations import parse_duration
from infersight.core.endpoint import server_root
from infersight.core.errors import ConfigError, read_user_file
from infersight.core.settings import BaseConfig, config_error
from infersight.gateway.config_litellm import from_litellm, is_litellm
from infersight.gateway.shared.config import SharedConfig

__all__ = [
    "BatchingConfig",
    "CostRule",
    "GatewayConfig",
    "KeyConfig",
    "SharedConfig",
    "UpstreamConfig",
    "hash_key",
    "load_config",
    "parse_upstream_flag",
]

LimiterKind = Literal["static", "aimd", "gradient"]
BatchEndpoint = Literal["embeddings", "completions"]
_EMBEDDINGS: BatchEndpoint = "embeddings"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class UpstreamConfig(_Strict):
    """One OpenAI-compatible upstream (engine, vLLM, SGLang, llama.cpp, hosted API)."""

    name: str
    url: str
    #: Models it serves. Empty: discovered from its ``/v1/models`` at start.
    models: list[str] = Field(default_factory=list)
    #: Environment variable holding this upstream's API key (never the key itself).
    api_key_env: str | None = None
    #: File holding the key (first line), when not given by env.
    api_key_file: str | None = None
    #: The key itself, set in code only: the embedded engine's internal key, made per
    #: start (never in a file, never dumped or shown).
    api_key: SecretStr | None = Field(default=None, exclude=True, repr=False)
    #: Client model name -> the name sent to this upstream (a LiteLLM ``model_name`` and
    #: its ``litellm_params.model``); names not in it are sent as they are.
    model_map: dict[str, str] = Field(default_factory=dict)
    #: Requests / tokens per minute this upstream takes (LiteLLM ``rpm`` / ``tpm``); over
    #: it, the upstream is skipped for the next candidate until its budget refills.
    requests_per_minute: float | None = Field(default=None, gt=0)
    tokens_per_minute: float | None = Field(default=None, gt=0)
    #: In-flight limit; the starting value for the adaptive limiters.
    concurrency: int = Field(default=32, ge=1)
    min_concurrency: int = Field(default=1, ge=1)
    max_concurrency: int = Field(default=1024, ge=1)
    #: Bounded queue behind the limit; 0 = reject as soon as the limit is reached.
    queue: int = Field(default=128, ge=0)
    limiter: LimiterKind = "static"
    #: Fail over when no content arrived within this many seconds (None: no limit).
    #: A non-streamed request's first byte is the response head: it is bound by
    #: ``first_byte_timeout_s``, or by this when that is unset.
    ttft_timeout_s: float | None = Field(default=None, gt=0)
    #: Non-streamed requests: fail over when the response head has not arrived within
    #: this many seconds. Engines send it once the whole answer is generated, so set it
    #: to the longest non-streamed generation you accept (default: ``ttft_timeout_s``).
    first_byte_timeout_s: float | None = Field(default=None, gt=0)
    connect_timeout_s: float = Field(default=5.0, gt=0)
    #: Gap between two stream chunks (or two reads of a non-streamed body) that
    #: counts as a broken answer.
    idle_timeout_s: float | None = Field(default=None, gt=0)
    #: Clamp ``max_tokens`` / ``max_completion_tokens`` sent to this upstream (and set
    #: it when a request gives none): bounds the KV cache one request may claim.
    max_tokens_cap: int | None = Field(default=None, ge=1)
    #: Attempts on this upstream per request (retries follow docs/design.md s.3).
    max_attempts: int = Field(default=2, ge=1)
    #: Circuit breaker: consecutive failures that open it, and seconds before probing.
    breaker_failures: int = Field(default=5, ge=1)
    breaker_cooldown_s: float = Field(default=10.0, gt=0)
    breaker_probes: int = Field(default=1, ge=1)
    #: Set in code only, for the embedded llama.cpp engine infersight started (``serve``,
    #: ``gateway`` without upstreams): its request checks apply, its own endpoints
    #: (/tokenize, /detokenize, /slots, /props) and metrics are served, and
    #: /v1/embeddings is not (it serves none).
    embedded: bool = False

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        v = v.strip().rstrip("/")
        if not re.match(r"^https?://[^/\s]+", v):
            raise ValueError(f"upstream url {v!r} must start with http:// or https://")
        return server_root(v)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9_.\-]+", v):
            raise ValueError(f"upstream name {v!r}: use letters, digits, '_', '-', '.'")
        return v


class KeyConfig(_Strict):
    """A gateway API key, stored only as its sha256 hex digest."""

    name: str
    sha256: str
    requests_per_minute: float | None = Field(default=None, gt=0)
    tokens_per_minute: float | None = Field(default=None, gt=0)
    #: Budget in dollars (priced usage); once spent, the key's requests get 429.
    max_cost_usd: float | None = Field(default=None, ge=0)

    @field_validator("sha256")
    @classmethod
    def _hex(cls, v: str) -> str:
        v = v.strip().lower()
        if not re.fullmatch(r"[0-9a-f]{64}", v):
            raise ValueError("sha256 must be 64 hex digits (run `infersight gateway --hash-key`)")
        return v


class CostRule(_Strict):
    """Send small requests for ``model`` to ``cheaper`` instead."""

    model: str
    cheaper: str
    #: Estimated prompt + max output tokens under which the cheaper model is used.
    max_tokens: int = Field(gt=0)


class BatchingConfig(_Strict):
    """Dynamic batching of embeddings and of non-streamed completions with prompt arrays."""

    enabled: bool = True
    endpoints: list[BatchEndpoint] = Field(default_factory=lambda: [_EMBEDDINGS])
    max_batch_size: int = Field(default=32, ge=1)
    max_wait_ms: float = Field(default=5.0, ge=0)
    #: Inputs whose lengths differ by more than this factor go to different batches.
    length_ratio: float = Field(default=4.0, ge=1.0)


class GatewayConfig(BaseConfig):
    """Everything the gateway needs. Env prefix ``INFERSIGHT_GATEWAY_``."""

    model_config = SettingsConfigDict(env_prefix="INFERSIGHT_GATEWAY_", extra="forbid")

    host: str = "127.0.0.1"
    port: int = Field(default=8090, ge=0, le=65535)
    upstreams: list[UpstreamConfig] = Field(default_factory=list)
    #: Model -> models tried next on overload, timeouts and 5xx.
    fallbacks: dict[str, list[str]] = Field(default_factory=dict)
    cost_rules: list[CostRule] = Field(default_factory=list)
    keys: list[KeyConfig] = Field(default_factory=list)
    #: Require a key even when ``keys`` is empty (then every request is refused).
    require_key: bool = False
    #: With keys configured everything but /health needs one; this opens /metrics
    #: alone (for a Prometheus that scrapes without credentials).
    metrics_public: bool = False
    #: Slow clients (nginx-like): the request head must be whole within this long of
    #: its first byte, a body may pause at most this long between reads, and an idle
    #: keep-alive connection is closed after this long.
    client_header_timeout_s: float = Field(default=60.0, gt=0)
    client_body_timeout_s: float = Field(default=60.0, gt=0)
    keepalive_timeout_s: float = Field(default=75.0, gt=0)
    #: Open connections allowed from one client address (0: no cap).
    max_connections_per_client: int = Field(default=1024, ge=0)
    batch: BatchingConfig = Field(default_factory=BatchingConfig)
    #: Limits, spend and breaker opens shared by replicas through Redis.
    shared: SharedConfig = Field(default_factory=SharedConfig)
    #: One deadline per request across queueing, retries and failover.
    default_deadline_s: float = Field(default=300.0, gt=0)
    max_deadline_s: float = Field(default=3600.0, gt=0)
    deadline_header: str = "X-Infersight-Deadline-Ms"
    priority_header: str = "X-Infersight-Priority"
    #: Largest accepted request body.
    max_body_bytes: int = Field(default=8 * 1024 * 1024, ge=1024)
    #: Price table override file (shipped defaults otherwise).
    prices_file: str | None = None
    access_log: bool = True
    #: Log each prompt's message hashes and lengths (docs/access-log.md; for replay).
    access_log_fingerprints: bool = True
    #: With no upstream, `infersight gateway` starts the embedded engine with these.
    engine_parallel: int = Field(default=8, ge=1)
    engine_ctx: int | None = None
    engine_limiter: LimiterKind = "static"
    engine_queue: int | None = Field(default=None, ge=0)


def hash_key(key: str) -> str:
    """The sha256 hex digest stored in the config for a gateway key."""
    return hashlib.sha256(key.encode()).hexdigest()


def _read_file(path: Path) -> dict[str, Any]:
    text = read_user_file(path, "gateway config").decode()
    try:
        if path.suffix.lower() in (".yaml", ".yml"):
            doc = yaml.safe_load(text) or {}
        else:
            doc = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, yaml.YAMLError) as e:
        line = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ConfigError(f"gateway config {path}: invalid syntax ({line})") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"gateway config {path}: the top level must be a table/mapping")
    return doc


def parse_upstream_flag(text: str) -> dict[str, Any]:
    """``NAME=URL[,models=a|b][,concurrency=N][,queue=N][,limiter=K][,key_env=VAR]
    [,key_file=PATH][,ttft=DURATION]`` (also ``attempts=N``, ``first_byte=DURATION``,
    ``idle=DURATION``, ``max_tokens_cap=N``); durations take 500ms, 2s or bare seconds."""
    head, _, rest = text.partition(",")
    name, eq, url = head.partition("=")
    if not eq or not name or not url:
        raise ConfigError(f"--upstream {text!r}: expected NAME=URL[,models=a|b,concurrency=N,...]")
    out: dict[str, Any] = {"name": name.strip(), "url": url.strip()}
    keys = {
        "models": "models",
        "concurrency": "concurrency",
        "queue": "queue",
        "limiter": "limiter",
        "key_env": "api_key_env",
        "api_key_env": "api_key_env",
        "key_file": "api_key_file",
        "api_key_file": "api_key_file",
        "ttft": "ttft_timeout_s",
        "ttft_timeout_s": "ttft_timeout_s",
        "attempts": "max_attempts",
        "max_attempts": "max_attempts",
        "first_byte": "first_byte_timeout_s",
        "idle": "idle_timeout_s",
        "max_tokens_cap": "max_tokens_cap",
    }
    for part in filter(None, rest.split(",")):
        k, eq, v = part.partition("=")
        k = k.strip()
        if not eq or k not in keys:
            raise ConfigError(
                f"--upstream {name}: unknown option {part!r} (known: {', '.join(sorted(keys))})"
            )
        out[keys[k]] = [m for m in v.split("|") if m] if k == "models" else v.strip()
    for field, short in (
        ("ttft_timeout_s", "ttft"),
        ("first_byte_timeout_s", "first_byte"),
        ("idle_timeout_s", "idle"),
    ):
        if field in out:
            out[field] = parse_duration(out[field], f"--upstream {name}: {short}")
    return out


def _with_master_key(data: dict[str, Any]) -> dict[str, Any]:
    """A LiteLLM ``master_key`` (its variable) as the one key clients must send."""
    var = data.pop("master_key_env", None)
    if var is None:
        return data

    key = resolve_api_key(env=var, required=True)
    assert key is not None
    return {**data, "keys": [KeyConfig(name="master", sha256=hash_key(key))], "require_key": True}


def load_config(path: str | Path | None = None, **overrides: Any) -> GatewayConfig:
    """File, then ``INFERSIGHT_GATEWAY_*`` env, then ``overrides`` (flags; None = unset)."""
    data: dict[str, Any] = _read_file(Path(path)) if path else {}
    if is_litellm(data):  # a LiteLLM proxy config.yaml: its supported subset
        data = _with_master_key(from_litellm(data, f"gateway config {path}"))
    # Env beats the file: only fields actually present in the environment are taken.
    prefix = "INFERSIGHT_GATEWAY_"
    env_fields = {n for n in GatewayConfig.model_fields if (prefix + n).upper() in os.environ}
    if env_fields:
        try:
            from_env = GatewayConfig().model_dump(include=env_fields)
        except ValidationError as e:
            raise config_error(e, names="env", env_prefix=prefix) from None
        data.update(from_env)
    redis_url = os.environ.get(prefix + "REDIS_URL")
    if redis_url:  # the one [shared] setting with its own variable: it may hold a password
        base = data.get("shared")
        data["shared"] = {**(base if isinstance(base, dict) else {}), "redis_url": redis_url}
    data.update({k: v for k, v in overrides.items() if v is not None})
    try:
        cfg = GatewayConfig.model_validate(data)
    except ValidationError as e:
        where = f"gateway config {path}" if path else "gateway settings"
        raise config_error(e, where=where) from None
    names = [u.name for u in cfg.upstreams]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ConfigError(
            f"gateway config: upstream names must be unique (repeated: {sorted(dup)})"
        )
    return cfg
