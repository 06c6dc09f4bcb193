#!/usr/bin/env python
"""CPU per model call spent in this process by passhat.infra.llm.complete (litellm included).

Starts the scripted oracle on a loopback OpenAI-compatible server in a child process
(bench/throughput.py's model server), so the server's CPU is not counted, then makes --calls calls to `complete` with the airline agent prompt and tool
schemas: one at a time, then --concurrency at once. Prints process CPU milliseconds per
call (time.process_time deltas) for each mode, --repeat times. Figures are printed,
never asserted; on a shared machine compare runs made close together.

    python bench/llm_overhead.py                          # 300 calls, sequential and c=30
    python bench/llm_overhead.py --calls 100 --repeat 5
    python bench/llm_overhead.py --llm /tmp/llm_before.py  # another copy of infra/llm.py
    python bench/llm_overhead.py --history 8               # requests 8 agent steps into a task
    python bench/llm_overhead.py --profile                 # cProfile of the concurrent run

litellm's own HTTP handler in place of the openai SDK (an experimental litellm switch,
not used by passhat) is measured by setting EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER=true
in the environment.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import statistics
import sys
import time

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

MODEL = "openai/oracle"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", "-n", type=int, default=300, help="calls per measurement")
    ap.add_argument("--concurrency", "-c", type=int, default=30, help="calls in flight, concurrent mode")
    ap.add_argument("--repeat", "-r", type=int, default=3, help="measurements per mode")
    ap.add_argument("--warmup", type=int, default=20, help="unmeasured calls first")
    ap.add_argument("--history", type=int, default=0,
                    help="agent steps played (unmeasured) before the measured requests, so these "
                         "carry that much conversation (tool results are placeholders)")
    ap.add_argument("--modes", default="seq,conc", help="comma-separated: seq, conc")
    ap.add_argument("--llm", default=None,
                    help="path of an infra/llm.py to measure instead of passhat.infra.llm")
    ap.add_argument("--profile", action="store_true",
                    help="cProfile one concurrent measurement and print the top functions")
    return ap.parse_args(argv)


def load_llm(path: str | None):
    if path is None:
        from passhat.infra import llm
        return llm
    spec = importlib.util.spec_from_file_location("passhat_llm_under_test", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # pydantic resolves the module's annotations through it
    spec.loader.exec_module(module)
    return module


def requests(domain: str) -> tuple[list[list[dict]], list[dict]]:
    """Opening agent requests of every task (so the oracle can answer each) and the tools."""
    from passhat.domains.registry import get_domain
    from passhat.testing.scripted_http import opening_request

    d = get_domain(domain)
    system = d.agent_system_prompt()
    convos = [[{"role": "system", "content": system},
               {"role": "user", "content": opening_request(d.task(t))}] for t in d.task_ids()]
    return convos, d.agent_tools()


async def grow(llm, convos, tools, model_args, steps: int) -> list[list[dict]]:
    """Each conversation after up to `steps` oracle agent steps: its tool calls answered
    with a placeholder result, in the message format passhat sends (llm.view_for)."""
    from passhat.messages import Message

    out = []
    for convo in convos:
        convo = list(convo)
        for _ in range(steps):
            reply = await llm.complete(MODEL, convo, tools=tools, role="assistant",
                                       model_args=model_args, metadata={}, seed=0, timeout_s=30)
            turn = [reply.message] + [
                Message(role="tool", content='{"status": "ok", "note": "placeholder result"}',
                        tool_call_id=c.id, requestor="assistant")
                for c in reply.message.tool_calls or []
            ]
            convo += llm.view_for("assistant", turn)
            if not reply.message.tool_calls:
                break
        out.append(convo)
    return out


async def run_calls(llm, n: int, concurrency: int, convos, tools, model_args) -> list:
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int):
        async with sem:
            return await llm.complete(MODEL, convos[i % len(convos)], tools=tools, role="assistant",
                                      model_args=model_args, metadata={"bench": True}, seed=i,
                                      timeout_s=30)

    return await asyncio.gather(*(one(i) for i in range(n)))


async def measure(args: argparse.Namespace, url: str) -> None:
    from passhat.testing.scripted_http import http_args

    llm = load_llm(args.llm)
    convos, tools = requests("airline")
    model_args = http_args(url)
    if args.history:
        convos = await grow(llm, convos, tools, model_args, args.history)
    handler = ("litellm HTTP handler" if os.environ.get("EXPERIMENTAL_OPENAI_BASE_LLM_HTTP_HANDLER")
               else "openai SDK")
    print(f"llm module: {llm.__file__} ({handler}); {len(tools)} tools, system prompt "
          f"{len(convos[0][0]['content'])} chars, {statistics.mean(len(c) for c in convos):.1f} "
          f"messages per request")
    replies = await run_calls(llm, args.warmup, 1, convos, tools, model_args)
    r = replies[0]
    print(f"sample reply: in={r.input_tokens} out={r.output_tokens} cost={r.cost!r} "
          f"finish={r.finish_reason} tool_calls={len(r.message.tool_calls or [])}")
    modes = {"seq": 1, "conc": args.concurrency}
    for name in [m.strip() for m in args.modes.split(",") if m.strip()]:
        per_call = []
        for _ in range(args.repeat):
            cpu, wall = time.process_time(), time.perf_counter()
            await run_calls(llm, args.calls, modes[name], convos, tools, model_args)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            per_call.append(cpu * 1000 / args.calls)
            print(f"  {name:4} c={modes[name]:<3} {args.calls} calls: {per_call[-1]:6.2f} ms CPU/call, "
                  f"{wall * 1000 / args.calls:6.2f} ms wall/call", flush=True)
        print(f"{name:4} median {statistics.median(per_call):.2f} ms CPU/call "
              f"(min {min(per_call):.2f}, max {max(per_call):.2f})")
    if args.profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        await run_calls(llm, args.calls, args.concurrency, convos, tools, model_args)
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(30)
        pstats.Stats(prof).sort_stats("cumulative").print_stats(40)


def main(argv: list[str] | None = None) -> int:
    import tempfile
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from throughput import ModelServer  # the loopback oracle in a process of its own

    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="passhat-llm-overhead-") as tmp:
        server = ModelServer("airline", 0.0, Path(tmp) / "model-server.log")
        try:
            asyncio.run(measure(args, server.url))
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
