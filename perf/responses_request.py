"""Responses API request cost: our path vs the SDK's parameter transform, in one run.

    python3 perf/responses_request.py [--turns 100,300] [--repeat 5]

``fte_shell.model.responses.ResponsesApi.send`` gives ``input`` and ``tools`` to ``client.responses.create`` in its
``extra_body`` (sent as they are); the baseline passes them as ``input=`` / ``tools=``, which the SDK walks
against its TypedDicts before sending. Both send the same conversation (``turns`` tool-call turns: a
reasoning item with encrypted content, a function call and its output each) to the loopback Responses
emulator of tests/emulator_responses.py; printed: the median seconds per request and the ratio
baseline / ours (the time a 300-turn run spends per request at its end).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from emulator_responses import ResponsesAPI, ResponsesEmulator

from fte_shell.config import ModelConfig
from fte_shell.model import responses
from fte_shell.model.client import ModelClient
from fte_shell.model.wire import Ask

TOOLS = [{"type": "function", "function": {"name": "bash", "description": "Run a command.",
                                           "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}]


def conversation(turns: int) -> list[dict]:
    msgs: list[dict] = [{"role": "system", "content": "You research."}, {"role": "user", "content": "Question?"}]
    for i in range(turns):
        items = [{"id": f"rs_{i}", "type": "reasoning", "summary": [],
                  "encrypted_content": "gAAAAAB" + "x" * 1200},
                 {"id": f"fc_{i}", "type": "function_call", "call_id": f"call_{i}", "name": "bash",
                  "arguments": json.dumps({"command": f"echo {i}"}), "status": "completed"}]
        msgs.append({"role": "assistant", "content": "", "output_items": items,
                     "tool_calls": [{"id": f"call_{i}", "type": "function",
                                     "function": {"name": "bash", "arguments": json.dumps({"command": f"echo {i}"})}}]})
        msgs.append({"role": "tool", "tool_call_id": f"call_{i}", "content": f"{i}\n" * 40})
    return msgs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--turns", default="100,300")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    with ResponsesEmulator(ResponsesAPI(strict=False), lambda b: "ok") as emu:
        cfg = ModelConfig(base_url=emu.base_url, model="emu-model", api="responses")
        client = ModelClient(cfg)
        wire = client.wire
        assert isinstance(wire, responses.ResponsesApi)
        sdk = wire.channel.client  # the same openai client, the same connection pool
        # the emulator does not know these made-up reasoning ids: register them as its own
        for i in range(max(int(t) for t in args.turns.split(","))):
            emu.personality.items[f"rs_{i}"] = {"id": f"rs_{i}", "encrypted_content": "gAAAAAB" + "x" * 1200}
            emu.personality.following[f"rs_{i}"] = f"fc_{i}"
        print(f"{'turns':>6} {'items':>6} {'ours':>10} {'sdk transform':>14} {'ratio':>7}")
        for turns in (int(t) for t in args.turns.split(",")):
            msgs = conversation(turns)
            request = wire.request(Ask(msgs, TOOLS, None, 256, None))
            kwargs = request.fields
            ours, base = [], []
            wire.send(request, None)  # warm: connection, imports
            for _ in range(args.repeat):  # interleaved
                t = time.perf_counter()
                wire.send(request, None)
                ours.append(time.perf_counter() - t)
                typed = {k: kwargs[k] for k in responses.TYPED_PARAMS if k in kwargs}
                t = time.perf_counter()
                raw = sdk.responses.with_raw_response.create(**typed, input=kwargs["input"], tools=kwargs["tools"])
                assert raw.status_code == 200
                base.append(time.perf_counter() - t)
            a, b = statistics.median(ours), statistics.median(base)
            print(f"{turns:>6} {len(kwargs['input']):>6} {a:>9.4f}s {b:>13.4f}s {b / a:>6.1f}x")
        client.close()


if __name__ == "__main__":
    main()
