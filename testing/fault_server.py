"""A fake OpenAI-compatible chat-completions server that fails on purpose.

Tests point litellm at it (``model="openai/<name>"``, ``api_base=srv.url + "/v1"``)
so every call goes through litellm's real HTTP path, and the server decides per
request whether to answer, and how to fail.

    with FaultServer(responder=my_agent, faults=["429", None, "drop"]) as srv:
        await litellm.acompletion(model="openai/m", api_base=srv.url + "/v1", api_key="x", ...)
        assert srv.served == 1

The server runs in a background thread with its own event loop, so the same
object works from sync tests and from async tests (the test's loop never has
to drive it). For tests that need the server in another process (e.g. to kill
the client process mid-call) run ``python -m passhat.testing.fault_server --port P
--config JSON``; see ``SubprocessFaultServer`` and ``_main``.

Fault plans (``faults=``):
  * a list: entry i applies to request i (0-based, in arrival order); ``None``
    or past the end of the list means "answer normally";
  * ``RandomFaults(rate=0.25, kinds=[...], seed=1)``: each request faults with
    probability ``rate``, kind chosen uniformly; seeded, so a run is repeatable (per
    arrival order, or per request with ``key=``);
  * a callable ``(request_number, body) -> fault | None``.
A fault is a kind string (``"429"``) or a ``Fault``/dict with parameters, e.g.
``Fault("429", retry_after=2)``, ``{"kind": "delay", "seconds": 0.5}``.

The responder (sync or async) runs on the server's own event loop thread: keep
sync responders quick, they hold up every other request while they run.

Kinds: delay, 429, 500, 503, drop, timeout, 401, 401_echo, 400, 404, context_window,
empty_choices, not_json. Models listed in ``bad_models`` (default ``{"bad-model"}``)
always get a 404 model_not_found, whatever the plan says.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import json
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable

from aiohttp import web

HOST = "127.0.0.1"  # never listen beyond loopback

KINDS = (
    "delay",
    "429",
    "500",
    "503",
    "drop",
    "timeout",
    "401",
    "401_echo",
    "400",
    "404",
    "context_window",
    "empty_choices",
    "not_json",
)


@dataclass(frozen=True)
class Fault:
    kind: str
    # delay: seconds before answering normally; timeout: how long to hold the
    # request (long enough to outlast any client timeout a test would use).
    seconds: float | None = None
    # 429 (always) and 503 (only if set): value of the Retry-After header.
    retry_after: float | int | None = None
    # Overrides the error message in the JSON error body.
    message: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown fault kind {self.kind!r}; expected one of {KINDS}")


def as_fault(spec: Any) -> Fault | None:
    """Normalise the user-facing fault spellings into a Fault (or None)."""
    if spec is None or isinstance(spec, Fault):
        return spec
    if isinstance(spec, (str, int)):
        return Fault(str(spec))
    if isinstance(spec, dict):
        spec = dict(spec)
        return Fault(str(spec.pop("kind")), **spec)
    raise TypeError(f"cannot interpret fault spec {spec!r}")


class RandomFaults:
    """Each request faults with probability `rate`; the RNG is seeded so that a
    given arrival order always gets the same faults.

    With `key` (a request body -> str), the draw is made per request instead: the m-th
    sending of a request with a given key gets the same fault whatever order requests
    arrive in. Concurrent conversations interleave differently from run to run, so only
    this makes which calls fault, and how often each is retried, repeatable."""

    def __init__(self, rate: float, kinds: Iterable[Any] = ("429", "500", "503", "drop"), seed: int = 0,
                 key: Callable[[dict], str] | None = None):
        self.rate = rate
        self.kinds = [as_fault(k) for k in kinds]
        self.seed = seed
        self.key = key
        self.reset()

    def __call__(self, n: int, body: dict) -> Fault | None:
        rng = self._rng
        if self.key is not None:
            k = self.key(body)
            self._sent[k] += 1
            # A str seed is hashed with SHA-512: the same draw in every process.
            rng = random.Random(f"{self.seed}:{self._sent[k]}:{k}")
        # Always draw both numbers so the fault sequence does not depend on
        # which branch earlier requests took.
        roll = rng.random()
        pick = rng.choice(self.kinds)
        return pick if roll < self.rate else None

    def reset(self) -> None:
        self._rng = random.Random(self.seed)
        self._sent: Counter = Counter()


FaultPlan = Callable[[int, dict], Any]


def _plan_from(faults: Any) -> FaultPlan:
    if faults is None:
        return lambda n, body: None
    if callable(faults):
        return faults
    if isinstance(faults, dict):  # JSON form of RandomFaults
        return RandomFaults(**faults)
    seq = [as_fault(f) for f in faults]
    return lambda n, body: seq[n] if n < len(seq) else None


# --------------------------------------------------------------------------- responders

Responder = Callable[[dict], "dict | str | Awaitable[dict | str]"]


def echo_responder(body: dict) -> dict:
    return {"content": "ok"}


def _normalise_message(msg: dict | str) -> dict:
    """Turn a responder's return value into an OpenAI assistant message.

    Tool-call `arguments` given as a str are passed through untouched (so a test
    can send invalid JSON on purpose); dicts are JSON-encoded."""
    if isinstance(msg, str):
        msg = {"content": msg}
    out: dict[str, Any] = {"role": "assistant", "content": msg.get("content")}
    calls = []
    for i, call in enumerate(msg.get("tool_calls") or []):
        fn = call.get("function", call)  # accept both OpenAI shape and {"name", "arguments"}
        args = fn.get("arguments", "{}")
        calls.append(
            {
                "id": call.get("id") or f"call_{i}_{uuid.uuid4().hex[:8]}",
                "type": "function",
                "function": {
                    "name": fn["name"],
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
        )
    if calls:
        out["tool_calls"] = calls
    return out


def _approx_tokens(obj: Any) -> int:
    # Rough, deterministic, and never zero: good enough for cost accounting tests.
    return max(1, len(json.dumps(obj, default=str)) // 4)


def _error(status: int, message: str, type_: str, code: str | None = None, param: str | None = None, headers=None):
    body = {"error": {"message": message, "type": type_, "param": param, "code": code}}
    return web.json_response(body, status=status, headers=headers)


# --------------------------------------------------------------------------- server


class FaultServer:
    def __init__(
        self,
        responder: Responder | None = None,
        faults: Any = None,
        bad_models: Iterable[str] = ("bad-model",),
        port: int = 0,
        timeout_hold: float = 60.0,
    ):
        self.responder = responder or echo_responder
        self._plan = _plan_from(faults)
        self.bad_models = set(bad_models)
        self.port = port
        self.timeout_hold = timeout_hold

        self._lock = threading.Lock()
        self._received = 0
        self._served = 0
        self._counts: Counter[str] = Counter()
        self._requests: list[dict] = []
        self._received_at_plan = 0  # request numbers restart when the plan is swapped
        self.errors: list[BaseException] = []  # responder exceptions, for debugging

        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._stopping: asyncio.Event | None = None

    # ---- counters (read from any thread)

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def received(self) -> int:
        with self._lock:
            return self._received

    @property
    def served(self) -> int:
        """Requests answered 200 with at least one choice."""
        with self._lock:
            return self._served

    @property
    def counts(self) -> dict[str, int]:
        """Per outcome kind: fault kinds as applied, plus "ok" for plain answers."""
        with self._lock:
            return dict(self._counts)

    @property
    def requests(self) -> list[dict]:
        """Parsed bodies of every request received, in arrival order."""
        with self._lock:
            return list(self._requests)

    def stats(self) -> dict:
        with self._lock:
            return {"received": self._received, "served": self._served, "counts": dict(self._counts)}

    def reset(self) -> None:
        """Zero the counters and restart the fault plan from request 0."""
        with self._lock:
            self._received = self._served = self._received_at_plan = 0
            self._counts.clear()
            self._requests.clear()
            self.errors.clear()
            if hasattr(self._plan, "reset"):
                self._plan.reset()

    def set_faults(self, faults: Any) -> None:
        """Swap the plan; request numbering restarts from 0 (call reset() too for counters)."""
        with self._lock:
            self._plan = _plan_from(faults)
            self._received_at_plan = self._received

    # ---- lifecycle

    def start(self) -> "FaultServer":
        started = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._astart())
            except BaseException as e:  # report bind errors etc. to the starting thread
                failure.append(e)
                started.set()
                return
            started.set()
            loop.run_forever()
            loop.run_until_complete(self._astop())
            loop.close()

        self._thread = threading.Thread(target=run, name="fault-server", daemon=True)
        self._thread.start()
        started.wait(10)
        if failure:
            raise failure[0]
        return self

    def stop(self) -> None:
        if self._loop and self._thread and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def __enter__(self) -> "FaultServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    async def __aenter__(self) -> "FaultServer":
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, *exc) -> None:
        await asyncio.to_thread(self.stop)

    async def _astart(self) -> None:
        self._stopping = asyncio.Event()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._handle)
        app.router.add_post("/chat/completions", self._handle)  # in case api_base lacks /v1
        app.router.add_get("/stats", self._handle_stats)
        app.router.add_post("/reset", self._handle_reset)
        # shutdown_timeout small: held "timeout" requests are released via _stopping anyway.
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, HOST, self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # resolve port 0

    async def _astop(self) -> None:
        assert self._stopping is not None
        self._stopping.set()
        if self._runner:
            await self._runner.cleanup()

    # ---- request handling

    async def _handle_stats(self, request: web.Request) -> web.Response:
        return web.json_response(self.stats())

    async def _handle_reset(self, request: web.Request) -> web.Response:
        self.reset()
        return web.json_response({"ok": True})

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except Exception:
            body = None
        with self._lock:
            n = self._received - self._received_at_plan
            self._received += 1
            self._requests.append(body)
            plan = self._plan
        if not isinstance(body, dict):
            self._count("bad_json")
            return _error(400, "request body is not a JSON object", "invalid_request_error")
        if body.get("stream"):
            # Not implemented; fail loudly rather than return a non-stream body.
            self._count("unsupported_stream")
            return _error(400, "fault_server does not support stream=true", "invalid_request_error")

        model = str(body.get("model", ""))
        if model in self.bad_models:
            self._count("404")
            return _error(404, f"The model `{model}` does not exist or you do not have access to it.",
                          "invalid_request_error", code="model_not_found")

        fault = as_fault(plan(n, body))
        if fault is not None:
            self._count(fault.kind)
            resp = await self._apply(fault, request)
            if resp is not None:
                return resp
        else:
            self._count("ok")
        return await self._answer(body)

    def _count(self, kind: str) -> None:
        with self._lock:
            self._counts[kind] += 1

    async def _apply(self, fault: Fault, request: web.Request) -> web.StreamResponse | None:
        """Return the error response for `fault`, or None to go on and answer normally."""
        k, msg = fault.kind, fault.message
        if k == "delay":
            await asyncio.sleep(fault.seconds if fault.seconds is not None else 1.0)
            return None
        if k == "429":
            ra = fault.retry_after if fault.retry_after is not None else 1
            return _error(429, msg or "Rate limit reached for requests", "requests",
                          code="rate_limit_exceeded", headers={"Retry-After": str(ra)})
        if k == "503":
            headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after is not None else None
            return _error(503, msg or "The server is overloaded or not ready yet.", "server_error", headers=headers)
        if k == "500":
            return _error(500, msg or "The server had an error while processing your request.", "server_error")
        if k == "401":
            return _error(401, msg or "Incorrect API key provided.", "invalid_request_error", code="invalid_api_key")
        if k == "401_echo":  # like providers that quote the key they were given
            key = request.headers.get("Authorization", "").removeprefix("Bearer ")
            return _error(401, f"Incorrect API key provided: {key}.", "invalid_request_error",
                          code="invalid_api_key")
        if k == "400":
            return _error(400, msg or "Invalid value for 'messages'.", "invalid_request_error", param="messages")
        if k == "404":
            return _error(404, msg or "The model does not exist.", "invalid_request_error", code="model_not_found")
        if k == "context_window":
            return _error(
                400,
                msg or "This model's maximum context length is 8192 tokens. However, your messages resulted in "
                "9000 tokens. Please reduce the length of the messages.",
                "invalid_request_error", code="context_length_exceeded", param="messages",
            )
        if k == "empty_choices":
            return web.json_response({
                "id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion",
                "created": int(time.time()), "model": "fault-server", "choices": [],
                "usage": {"prompt_tokens": 1, "completion_tokens": 0, "total_tokens": 1},
            })
        if k == "not_json":  # a proxy's HTML page where the API should be
            return web.Response(status=200, text="<html><body>Sign in to continue</body></html>",
                                content_type="text/html")
        if k == "drop":
            # Close the socket without writing a status line: the client sees the
            # connection end mid-request. Then return a response aiohttp can't send.
            if request.transport is not None:
                request.transport.close()
            return web.Response(status=500)
        if k == "timeout":
            # Hold the request open until well past the client's timeout, but let
            # server shutdown release it so stop() never waits for the full hold.
            hold = fault.seconds if fault.seconds is not None else self.timeout_hold
            assert self._stopping is not None
            try:
                await asyncio.wait_for(self._stopping.wait(), hold)
            except asyncio.TimeoutError:
                pass
            return _error(504, "held past the client's timeout", "server_error")
        raise AssertionError(k)

    async def _answer(self, body: dict) -> web.Response:
        try:
            out = self.responder(body)
            if inspect.isawaitable(out):
                out = await out
            message = _normalise_message(out)
        except Exception as e:  # a broken responder is a test bug: make it visible
            with self._lock:
                self.errors.append(e)
                self._counts["responder_error"] += 1
            return _error(500, f"responder raised {type(e).__name__}: {e}", "server_error")
        prompt = _approx_tokens(body.get("messages", []))
        completion = _approx_tokens([message.get("content"), message.get("tool_calls")])
        with self._lock:
            self._served += 1
        return web.json_response({
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "fault-server"),
            "choices": [{
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
            }],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                      "total_tokens": prompt + completion},
        })


# --------------------------------------------------------------------------- subprocess mode


def _responder_from(spec: Any) -> Responder | None:
    """Config "responder": null/"echo", {"content": "..."} (fixed reply), or "pkg.mod:func"."""
    if spec in (None, "echo"):
        return None
    if isinstance(spec, dict):
        return lambda body, _m=spec: dict(_m)
    mod, _, attr = str(spec).partition(":")
    return getattr(importlib.import_module(mod), attr)


def server_from_config(config: dict, port: int = 0) -> FaultServer:
    """Config keys: faults (list, or {"rate","kinds","seed"}), responder, bad_models, timeout_hold."""
    kwargs: dict[str, Any] = {"faults": config.get("faults"), "responder": _responder_from(config.get("responder")),
                              "port": port}
    if "bad_models" in config:
        kwargs["bad_models"] = config["bad_models"]
    if "timeout_hold" in config:
        kwargs["timeout_hold"] = config["timeout_hold"]
    return FaultServer(**kwargs)


class SubprocessFaultServer:
    """Run the server as `python -m passhat.testing.fault_server` in a child process.

    Counters live in the child, so read them with stats() (GET /stats)."""

    def __init__(self, config: dict | None = None, port: int = 0, cwd: str | None = None):
        self.config = config or {}
        self.port = port
        self.cwd = cwd
        self.proc: subprocess.Popen | None = None
        self.url = ""

    def __enter__(self) -> "SubprocessFaultServer":
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "passhat.testing.fault_server", "--port", str(self.port), "--config", json.dumps(self.config)],
            stdout=subprocess.PIPE, text=True, cwd=self.cwd,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # "READY http://127.0.0.1:PORT"
        if not line.startswith("READY "):
            self.proc.kill()
            raise RuntimeError(f"fault server failed to start: {line!r}")
        self.url = line.split()[1]
        self.port = int(self.url.rsplit(":", 1)[1])
        return self

    def stats(self) -> dict:
        with urllib.request.urlopen(self.url + "/stats", timeout=5) as r:
            return json.load(r)

    def reset(self) -> None:
        urllib.request.urlopen(urllib.request.Request(self.url + "/reset", method="POST"), timeout=5).close()

    def __exit__(self, *exc) -> None:
        if self.proc:
            stop_process(self.proc)


def stop_process(proc: subprocess.Popen, grace: float = 10) -> None:
    """SIGTERM a child process, SIGKILL it if it has not ended after `grace` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--config", default="{}", help="JSON: faults, responder, bad_models, timeout_hold")
    args = ap.parse_args(argv)
    srv = server_from_config(json.loads(args.config), port=args.port).start()
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    print(f"READY {srv.url}", flush=True)  # the parent waits for this line
    while not done.wait(0.5):  # timed wait so signals are handled promptly
        pass
    srv.stop()


if __name__ == "__main__":
    _main()
