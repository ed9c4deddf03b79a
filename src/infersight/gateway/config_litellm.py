"""A LiteLLM proxy ``config.yaml`` read as a gateway config (the supported subset).

The shortest path for a LiteLLM user: ``infersight gateway --config litellm.yaml``.
What is read, and what it becomes:

- ``model_list[]``: one upstream per deployment. ``model_name`` is the name clients
  send; ``litellm_params.model`` (``openai/NAME``, ``hosted_vllm/NAME``,
  ``text-completion-openai/NAME``, ``openai_like/NAME``, ``lm_studio/NAME``,
  ``llamafile/NAME`` or a bare ``NAME``: OpenAI-compatible servers) is the name sent
  upstream; ``api_base`` its URL (default ``https://api.openai.com`` for ``openai``);
  ``api_key: os.environ/NAME`` the variable holding its key (a key written in the file
  is refused: keys come from the environment); ``rpm`` / ``tpm`` (in ``litellm_params``
  or beside it) the deployment's requests / tokens per minute: a deployment over its
  limit is skipped for another. Deployments sharing a ``model_name`` share its load.
  ``model_info`` is descriptive; its ``id`` names the upstream.
- ``router_settings`` and ``litellm_settings``: ``num_retries`` (attempts per upstream
  = 1 + retries), ``timeout`` / ``request_timeout`` (a request's deadline, seconds) and
  ``fallbacks`` (``[{model: [fallback, ...]}]``).
- ``general_settings.master_key: os.environ/NAME``: the key clients must send.

Anything else is one ConfigError naming every unsupported key, so nothing is silently
ignored.
"""

from __future__ import annotations

import os
import re
from typing import Any

from infersight.core.errors import ConfigError

__all__ = ["OPENAI_COMPATIBLE", "from_litellm", "is_litellm"]

#: LiteLLM provider prefixes whose servers speak the OpenAI API (what the gateway proxies).
OPENAI_COMPATIBLE = (
    "openai",
    "hosted_vllm",
    "text-completion-openai",
    "openai_like",
    "lm_studio",
    "llamafile",
)
_DEFAULT_BASE = {
    "openai": "https://api.openai.com",
    "text-completion-openai": "https://api.openai.com",
}
_TOP = {"model_list", "router_settings", "litellm_settings", "general_settings"}
_PARAMS = {"model", "api_base", "api_key", "rpm", "tpm"}
_ROUTER = {"num_retries", "timeout", "request_timeout", "fallbacks"}
_GENERAL = {"master_key"}
_ENV = "os.environ/"


def is_litellm(doc: dict[str, Any]) -> bool:
    """True for a LiteLLM proxy config (it has a ``model_list``)."""
    return "model_list" in doc


class _Reader:
    def __init__(self, where: str) -> None:
        self.where = where
        self.unsupported: list[str] = []

    def extra(self, d: dict[str, Any], known: set[str], path: str) -> None:
        self.unsupported += [f"{path}.{k}" if path else str(k) for k in d if k not in known]

    def env(self, value: Any, path: str) -> str:
        """The variable name of ``os.environ/NAME``."""
        if not isinstance(value, str) or not value.startswith(_ENV) or not value[len(_ENV) :]:
            raise ConfigError(
                f"{self.where}: {path}: write os.environ/NAME and put the key in that "
                "environment variable (infersight never reads keys from config files)"
            )
        return value[len(_ENV) :]


def _mapping(v: Any, what: str) -> dict[str, Any]:
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise ConfigError(f"{what} must be a mapping")
    return v


def _wire_model(r: _Reader, model: Any, path: str) -> tuple[str, str]:
    """(provider, the model name sent upstream) from ``litellm_params.model``."""
    if not isinstance(model, str) or not model.strip():
        raise ConfigError(f"{r.where}: {path}: give the model, e.g. openai/NAME")
    provider, sep, rest = model.partition("/")
    if not sep:
        return "openai", model
    if provider not in OPENAI_COMPATIBLE:
        raise ConfigError(
            f"{r.where}: {path}: provider {provider!r} is not supported; the gateway proxies "
            f"OpenAI-compatible servers ({', '.join(p + '/' for p in OPENAI_COMPATIBLE)})"
        )
    return provider, rest


def _deployment(r: _Reader, i: int, entry: Any, names: dict[str, int]) -> dict[str, Any]:
    path = f"model_list[{i}]"
    entry = _mapping(entry, f"{r.where}: {path}")
    r.extra(entry, {"model_name", "litellm_params", "model_info", "rpm", "tpm"}, path)
    name = entry.get("model_name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{r.where}: {path}: model_name is missing")
    params = _mapping(entry.get("litellm_params"), f"{r.where}: {path}.litellm_params")
    r.extra(params, _PARAMS, f"{path}.litellm_params")
    provider, wire = _wire_model(r, params.get("model"), f"{path}.litellm_params.model")
    base = params.get("api_base") or _DEFAULT_BASE.get(provider)
    if isinstance(base, str) and base.startswith(_ENV):
        base = os.environ.get(base[len(_ENV) :]) or base
    if not base:
        raise ConfigError(f"{r.where}: {path}.litellm_params.api_base: the server's URL is missing")
    info = _mapping(entry.get("model_info"), f"{r.where}: {path}.model_info")
    label = str(info.get("id") or re.sub(r"[^A-Za-z0-9_.\-]+", "-", name).strip("-") or "model")
    names[label] = names.get(label, 0) + 1
    up: dict[str, Any] = {
        "name": label if names[label] == 1 else f"{label}-{names[label]}",
        "url": base,
        "models": [name],
    }
    if wire != name:
        up["model_map"] = {name: wire}
    if "api_key" in params:
        up["api_key_env"] = r.env(params["api_key"], f"{path}.litellm_params.api_key")
    for key, field in (("rpm", "requests_per_minute"), ("tpm", "tokens_per_minute")):
        value = params.get(key, entry.get(key))
        if value is not None:
            up[field] = value
    return up


def _fallbacks(r: _Reader, value: Any, path: str) -> dict[str, list[str]]:
    """LiteLLM's ``[{model: [fallback, ...]}, ...]`` (a plain mapping is read too)."""
    items = value if isinstance(value, list) else [value]
    out: dict[str, list[str]] = {}
    for item in items:
        if not isinstance(item, dict):
            raise ConfigError(f"{r.where}: {path}: expected [{{model: [fallback, ...]}}]")
        for model, chain in item.items():
            out[str(model)] = [str(m) for m in (chain if isinstance(chain, list) else [chain])]
    return out


def from_litellm(doc: dict[str, Any], where: str) -> dict[str, Any]:
    """The gateway config (as a dict for :class:`GatewayConfig`) of a LiteLLM config."""
    r = _Reader(where)
    r.extra(doc, _TOP, "")
    models = doc.get("model_list")
    if not isinstance(models, list) or not models:
        raise ConfigError(f"{where}: model_list must be a non-empty list of deployments")
    names: dict[str, int] = {}
    ups = [_deployment(r, i, e, names) for i, e in enumerate(models)]
    out: dict[str, Any] = {"upstreams": ups}
    for section in ("litellm_settings", "router_settings"):  # the router's settings win
        s = _mapping(doc.get(section), f"{where}: {section}")
        r.extra(s, _ROUTER, section)
        if "num_retries" in s:
            for u in ups:
                u["max_attempts"] = int(s["num_retries"]) + 1
        for key in ("request_timeout", "timeout"):
            if s.get(key) is not None:
                out["default_deadline_s"] = float(s[key])
        if s.get("fallbacks"):
            out["fallbacks"] = {
                **out.get("fallbacks", {}),
                **_fallbacks(r, s["fallbacks"], f"{section}.fallbacks"),
            }
    general = _mapping(doc.get("general_settings"), f"{where}: general_settings")
    r.extra(general, _GENERAL, "general_settings")
    if "master_key" in general:
        out["master_key_env"] = r.env(general["master_key"], "general_settings.master_key")
    if r.unsupported:
        raise ConfigError(
            f"{where}: LiteLLM keys infersight does not support: {', '.join(r.unsupported)} "
            "(remove them; the README's LiteLLM section lists what is read)"
        )
    return out
