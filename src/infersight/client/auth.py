"""API keys from an environment variable or a file, with placeholders refused.

A placeholder key (``YOUR_API_KEY``, ``sk-xxxx``, ``changeme``...) would be sent and
earn a confusing 401; it is refused before any request with a ConfigError that names
the variable or file. The key itself never appears in a message.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from infersight.core.errors import ConfigError

__all__ = ["is_placeholder", "resolve_api_key"]

_PLACEHOLDER = re.compile(
    r"""^(
        |your[-_ ].*            # YOUR_API_KEY, your-key-here
        |.*your[-_]?(api[-_]?)?key.*
        |sk-[x.*]+              # sk-xxxx, sk-...
        |sk-(proj-)?(x+|\.+|\*+|your.*|\.\.\..*)
        |x{3,}                  # xxx
        |\*{3,}|\.{3,}
        |<.*>|\{.*\}|\$\{.*\}   # <api-key>, {key}, ${KEY}
        |change[-_ ]?me|replace[-_ ]?me|placeholder|insert[-_ ].*|todo|fixme
        |api[-_]?key|token|secret|key
    )$""",
    re.IGNORECASE | re.VERBOSE,
)


def is_placeholder(value: str) -> bool:
    """True for empty values and the usual copy-paste placeholders."""
    return bool(_PLACEHOLDER.match(value.strip()))


def resolve_api_key(
    *, env: str | None = None, file: str | None = None, required: bool = False
) -> str | None:
    """The API key from environment variable ``env``, else from the first line of ``file``.

    Returns None when neither is set (ConfigError if ``required``). A set value that is
    a placeholder, or an unreadable file, is a ConfigError naming its source.
    """
    if env:
        value = os.environ.get(env)
        if value is not None and (value.strip() or not file):
            if is_placeholder(value):
                what = "empty" if not value.strip() else "a placeholder, not a real key"
                raise ConfigError(
                    f"environment variable {env} is {what}; set it to the real API key or unset it"
                )
            return value.strip()
    if file:
        p = Path(file).expanduser()
        try:
            text = p.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(f"API key file {p}: no such file") from None
        except (OSError, UnicodeDecodeError) as e:
            reason = getattr(e, "strerror", None) or "not readable text"
            raise ConfigError(f"API key file {p}: cannot read ({reason})") from None
        lines = text.strip().splitlines()
        value = lines[0].strip() if lines else ""
        if is_placeholder(value):
            what = "empty" if not value else "a placeholder, not a real key"
            raise ConfigError(f"API key file {p} is {what}; put the real key on its first line")
        return value
    if required:
        where = " or ".join(x for x in (f"${env}" if env else "", file or "") if x)
        raise ConfigError(f"an API key is required: set {where or 'an API key'}")
    return None
