"""Keeping secrets out of what passhat records: run configurations (stored, and the input
of every workflow the Temporal UI shows) never hold one, and error text is redacted
before it is stored, logged, traced, put in a Temporal failure or printed."""

from __future__ import annotations

import os
import re
from typing import Any

# Argument names that carry credentials (api_key, token, Authorization, a Cookie header,
# aws_access_key_id, ...); litellm's prices (input_cost_per_token, output_cost_per_token)
# are not.
_SECRET_NAME = re.compile(
    r"(^|[_-])(api[_-]?key|key|(?<!per[_-])token|secret|password|passwd|authorization|auth"
    r"|credentials?|cookie)$|access[_-]?key",
    re.IGNORECASE,
)
# Environment variables that hold provider keys (OPENAI_API_KEY, HF_TOKEN, ...).
_SECRET_ENV = re.compile(r"(API_KEY|_KEY|TOKEN|SECRET|PASSWORD)$", re.IGNORECASE)
# Key-shaped strings, whoever holds them (OpenAI / Anthropic style "sk-...").
_KEY_SHAPED = re.compile(r"\bsk-[A-Za-z0-9_-]{8,}")
REDACTED = "[REDACTED]"
# What names a key in an environment variable instead (resolved by each worker).
API_KEY_ENV = "api_key_env"


def is_secret_name(name: object) -> bool:
    """Whether an argument of this name carries a credential. api_key_env does not: it
    names the variable that holds a key."""
    return name != API_KEY_ENV and bool(_SECRET_NAME.search(str(name)))


def secret_fields(args: dict[str, Any], prefix: str = "") -> list[str]:
    """The fields of litellm model arguments that would carry a secret, nested ones (for
    example extra_headers.Authorization, fallbacks.0.api_key) included."""
    found = []
    for name, value in args.items():
        path = f"{prefix}{name}"
        if is_secret_name(name):
            found.append(path)
        elif isinstance(value, dict):
            found += secret_fields(value, prefix=f"{path}.")
        elif isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, dict):
                    found += secret_fields(item, prefix=f"{path}.{index}.")
    return found


def without_secrets(value: Any) -> Any:
    """`value` without any dict entry that secret_fields would name, at any depth: what
    a results file may hold of model arguments that came from elsewhere."""
    if isinstance(value, dict):
        return {k: without_secrets(v) for k, v in value.items() if not is_secret_name(k)}
    if isinstance(value, list):
        return [without_secrets(v) for v in value]
    return value


def is_secret_env(name: str) -> bool:
    """Whether an environment variable of this name holds a key (OPENAI_API_KEY, HF_TOKEN)."""
    return bool(_SECRET_ENV.search(name))


def known_secrets() -> list[str]:
    """Values this process must never let out: the environment's key variables."""
    return sorted(
        (v for k, v in os.environ.items() if is_secret_env(k) and len(v) >= 8),
        key=len,
        reverse=True,  # longest first, so a key that contains another is removed whole
    )


def redact(text: str) -> str:
    """`text` without any known secret value or key-shaped string."""
    for secret in known_secrets():
        text = text.replace(secret, REDACTED)
    return _KEY_SHAPED.sub(REDACTED, text)
