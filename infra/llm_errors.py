"""A failed model call, classified: transient (a rate limit, a 5xx, a timeout, a dropped
connection: retried with backoff, never sooner than the provider's Retry-After),
deterministic (authentication, a bad request, an unknown model, a missing key or
provider package: not retried), or the model's own failure (its context overflowed, its
output was filtered: the conversation ends there, as in tau2). Each says in one line
what failed."""

from __future__ import annotations

import re
import time
from typing import Any

from passhat.infra import secrets


class ModelCallError(Exception):
    """A model call that failed. `transient` errors are worth retrying. A `model_failure`
    is the model's own doing (its context overflowed, its output was filtered): the
    conversation ends there and counts against the model, as in tau2."""

    def __init__(
        self,
        message: str,
        *,
        error_class: str,
        transient: bool,
        model_failure: bool = False,
        status_code: int | None = None,
        retry_after_s: float | None = None,
    ):
        super().__init__(message)
        self.error_class = error_class
        self.transient = transient
        self.model_failure = model_failure
        self.status_code = status_code
        self.retry_after_s = retry_after_s


# Checked in order: subclasses before their bases (ContextWindowExceededError is a
# BadRequestError, for instance). The model's own failures: the conversation it produced
# no longer fits, or its output was filtered.
_MODEL_FAILURES = [
    "ContextWindowExceededError",
    "ContentPolicyViolationError",
]
_DETERMINISTIC = [
    "AuthenticationError",
    "PermissionDeniedError",
    "NotFoundError",
    "UnsupportedParamsError",
    "BadRequestError",
    "UnprocessableEntityError",
]
_TRANSIENT = [
    "RateLimitError",
    "Timeout",
    "APIConnectionError",
    "ServiceUnavailableError",
    "InternalServerError",
    "BadGatewayError",
    "APIError",
]


def classify(exc: BaseException, model: str | None = None) -> ModelCallError:
    """Map a litellm (or transport) exception to a ModelCallError whose message says in
    one line what failed: error class, HTTP status, model, provider's message."""
    import litellm

    status = getattr(exc, "status_code", None)
    status = status if isinstance(status, int) else None

    def error(name: str, transient: bool, model_failure: bool = False) -> ModelCallError:
        where = (f" (HTTP {status})" if status else "") + (f" calling {model}" if model else "")
        return ModelCallError(
            secrets.redact(f"{name}{where}: {provider_message(exc)}"),
            error_class=name,
            transient=transient,
            model_failure=model_failure,
            status_code=status,
            retry_after_s=retry_after_seconds(exc) if transient else None,
        )

    inner = _custom_provider_error(exc)
    if inner is not None:
        # A custom provider's own code raised: its exception, not the connection error
        # litellm wraps it in, is what failed. A bug there is not fixed by retrying.
        return ModelCallError(
            secrets.redact(f"{type(inner).__name__} in provider {exc.llm_provider!r}"
                           f"{f' calling {model}' if model else ''}: {' '.join(str(inner).split())}"),
            error_class=type(inner).__name__,
            transient=isinstance(inner, (TimeoutError, ConnectionError)),
        )
    configuration = _configuration_error(exc, model)
    if configuration is not None:
        return configuration
    if isinstance(exc, litellm.InternalServerError) and _INVALID_BODY in str(exc):
        # litellm reports an answer it cannot parse (an HTML page from a proxy, with
        # status 200) as a 500: say what came back. Retrying the same endpoint gets the
        # same page, so the fix is the api_base.
        status = None
        return error("InvalidResponseError", transient=False)
    for name in _MODEL_FAILURES:
        cls = getattr(litellm, name, None)
        if cls is not None and isinstance(exc, cls):
            return error(name, transient=False, model_failure=True)
    for name in _DETERMINISTIC:
        cls = getattr(litellm, name, None)
        if cls is not None and isinstance(exc, cls):
            return error(name, transient=False)
    for name in _TRANSIENT:
        cls = getattr(litellm, name, None)
        if cls is not None and isinstance(exc, cls):
            if name == "InternalServerError" and "Connection error" in str(exc):
                # litellm reports a dropped or refused connection as a 500 without headers:
                # no server answered, so there is no HTTP status to show.
                name, status = "APIConnectionError", None
            return error(name, transient=True)
    if status is not None:
        return error(f"HTTP{status}", transient=status in (408, 409, 425, 429) or status >= 500)
    if isinstance(exc, (TimeoutError, ConnectionError, OSError)):
        return error(type(exc).__name__, transient=True)
    # Unknown provider prefixes and other configuration mistakes raise plain exceptions
    # from litellm; retrying them cannot help.
    return error(type(exc).__name__, transient=False)


# What litellm says when a 200 answer's body is not a chat completion.
_INVALID_BODY = "Empty or invalid response from LLM endpoint"
# How providers' clients say no key was given: openai's "Missing credentials" (which
# litellm hands on as a 500), Anthropic's "Missing Anthropic API Key", "api_key ... must
# be set".
_NO_KEY = re.compile(
    r"missing credentials|missing [\w ]*api key|api[_ ]?key[\w `'\"]* (?:is not set|must be set|is missing)"
    r"|no (?:api )?key is set",
    re.IGNORECASE,
)
# What litellm says when a model string names no provider it knows.
_NO_PROVIDER = "LLM Provider NOT provided"


def _configuration_error(exc: BaseException, model: str | None) -> ModelCallError | None:
    """Errors of the run's or the worker's configuration that litellm reports as 500s or
    connection errors although every retry fails the same way: no key, a model string
    without a provider, a provider's package that is not installed, an api_base that is
    not a URL. None for anything else."""
    calling = f" calling {model}" if model else ""

    def error(name: str, text: str) -> ModelCallError:
        return ModelCallError(secrets.redact(f"{name}{calling}: {text}"), error_class=name, transient=False)

    said = provider_message(exc)
    if _NO_KEY.search(said):
        from passhat.infra.llm import missing_key_variables  # the module that calls us

        names = missing_key_variables(model, {}) if model else []
        return error("MissingApiKey", (
            f"{' and '.join(names)} {'is' if len(names) == 1 else 'are'} not set on this worker"
            if names else f"no API key on this worker ({said})")
            + "; set the key in the environment of the processes that run workers, or name "
            f'another variable with {{"{secrets.API_KEY_ENV}": "NAME"}} in the model\'s args')
    if _NO_PROVIDER in said:
        return error("UnknownProvider", (
            f"litellm cannot tell which provider serves '{model}': give the model as "
            "provider/name, e.g. openai/gpt-4.1 or hosted_vllm/<name>"))
    causes = list(_causes(exc))
    missing = next((c for c in causes if isinstance(c, ImportError)), None)
    if missing is not None:
        first = str(missing).splitlines()[0] if str(missing) else type(missing).__name__
        return error("MissingDependency", f"{first}; install it where the workers run")
    bad_url = _invalid_url(causes)
    if bad_url is not None:
        return error("InvalidApiBase", (
            f"the model's URL cannot be requested ({type(bad_url).__name__}: "
            f"{' '.join(str(bad_url).split())}); check the api_base in the model's args"))
    return None


def _causes(exc: BaseException, seen: set[int] | None = None):  # noqa: ANN202 - an iterator of exceptions
    """`exc` and the exceptions it was raised from or while handling, innermost last; an
    exception group's own exceptions right after it (httpx's connect under anyio raises
    one: the client tau2 1.0.x gives litellm, `litellm.aclient_session`)."""
    seen = set() if seen is None else seen
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        for inner in current.exceptions if isinstance(current, BaseExceptionGroup) else ():
            yield from _causes(inner, seen)
        current = current.__cause__ or current.__context__


def _invalid_url(causes: list[BaseException]) -> BaseException | None:
    """The error a malformed request URL raised, under a connection error: httpx's
    InvalidURL or UnsupportedProtocol, aiohttp's InvalidURL or NonHttpUrlClientError
    (litellm's transport), a ValueError from below the HTTP client ("Port out of
    range") or the socket's OverflowError ("port must be 0-65535"). A refused or dropped
    connection, or a name that does not resolve, raises
    OSErrors instead: those stay transient."""
    import aiohttp
    import httpx

    malformed = tuple(c for c in (httpx.InvalidURL, httpx.UnsupportedProtocol, aiohttp.InvalidURL,
                                  getattr(aiohttp, "NonHttpUrlClientError", None)) if c is not None)
    connection = False
    for cause in causes:
        if isinstance(cause, malformed):
            return cause
        if isinstance(cause, ValueError) and (connection or str(cause).startswith("Port out of range")):
            return cause  # (litellm 1.82's OpenAI client raises "Port out of range" unwrapped)
        if isinstance(cause, OverflowError) and "port must be 0-65535" in str(cause):
            return cause  # the socket's own refusal, under httpx's anyio connect
        connection = connection or type(cause).__name__ in ("APIConnectionError", "RequestError", "ConnectError")
    return None


def _custom_provider_error(exc: BaseException) -> BaseException | None:
    """The exception a registered custom provider raised, which litellm hands on as an
    APIConnectionError ("HTTP 500") with the original as its context; None otherwise."""
    import litellm

    inner = exc.__context__
    if not isinstance(exc, litellm.APIConnectionError) or inner is None:
        return None
    custom = {entry.get("provider") for entry in litellm.custom_provider_map or []}
    if getattr(exc, "llm_provider", None) not in custom or type(inner).__module__.startswith(
        ("litellm", "openai", "httpx", "httpcore", "aiohttp")
    ):
        return None
    return inner


def provider_message(exc: BaseException) -> str:
    """The provider's own words, without the class names litellm stacks in front of them
    ("litellm.RateLimitError: RateLimitError: OpenAIException - ...")."""
    text = " ".join(str(exc).split())
    while True:
        head, sep, rest = text.partition(": ")
        if sep and head.replace("litellm.", "").isidentifier():
            text = rest
            continue
        break
    head, sep, rest = text.partition(" - ")
    if sep and head.endswith("Exception") and head.isidentifier():
        text = rest
    return text or type(exc).__name__


def retry_after_seconds(exc: BaseException) -> float | None:
    """Retry-After from the provider's response headers, in seconds, if it sent one:
    `retry-after-ms`, or `retry-after` in seconds or as an HTTP date."""
    # litellm keeps the provider's real headers on litellm_response_headers; the
    # exception's .response is a stand-in without them.
    headers = getattr(exc, "litellm_response_headers", None)
    if headers is None and getattr(exc, "response", None) is not None:
        headers = getattr(exc.response, "headers", None)
    if not headers:
        return None
    for key in ("retry-after-ms", "retry-after"):
        value = headers.get(key) if hasattr(headers, "get") else None
        if value is None:
            continue
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            seconds = _seconds_until(value) if key == "retry-after" else None
            if seconds is None:
                continue
        return seconds / 1000.0 if key.endswith("-ms") else seconds
    return None


def _seconds_until(http_date: Any) -> float | None:
    """Seconds from now until an HTTP date (RFC 9110), never negative; None if it is not one."""
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(str(http_date))
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - time.time())
