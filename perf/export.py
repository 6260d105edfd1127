"""How fast a large sweep exports to Inspect AI eval logs and to ATIF (``fte-shell export``).

A sweep of N runs (default 2,000: 2 profiles × N/4 questions × 2 repetitions) is synthesized on disk
through fte_shell.record's writers (``SweepDir``, ``RunWriter``, ``write_judgement``) with realistic
sizes: 6–20 turns a run, a reasoning text and a tool call per turn, observations of 200 B–24 KB (a shell
command's output, capped), the model-free verdict; 2 % of the runs end for an infrastructure reason.
Measured in this invocation: the baseline (reading every run's record: ``trajectory.jsonl``,
``result.json``, ``judgement.json`` through ``fte_shell.export.common.read_runs``), then the Inspect export
(``.eval``), the Inspect export (``.json``) and the ATIF export, each printed in seconds with the ratio
against the baseline (wall clock and CPU time: on a shared machine the CPU seconds are the steadier
figure). The goal: each export under a minute on this machine.

    python perf/export.py [--runs 2000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import tempfile
import time
from pathlib import Path

from fte_shell.export.atif_trajectory import export_atif
from fte_shell.export.common import read_runs
from fte_shell.export.inspect_log import export_inspect
from fte_shell.record.events import EndEvent, ErrorEvent, ModelCallEvent, StartEvent, ToolCallEvent
from fte_shell.record.rundir import RunWriter, write_judgement
from fte_shell.record.sweepdir import SweepDir

WORDS = [
    "the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was", "with", "be", "by",
    "on", "not", "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "had",
    "they", "you", "were", "their", "one", "all", "we", "can", "her", "has", "there", "been", "if",
    "more", "when", "will", "would", "who", "so", "no"
]
PROFILES = {"shell": ["bash"], "fte": ["search", "fetch", "grep", "read"]}


def text(rng: random.Random, chars: int) -> str:
    out: list[str] = []
    n = 0
    while n < chars:
        w = rng.choice(WORDS)
        out.append(w)
        n += len(w) + 1
    return " ".join(out)[:chars]


def tools(names: list[str]) -> list[dict]:
    return [{"type": "function", "function": {"name": n, "description": f"The {n} tool.", "parameters": {
        "type": "object", "properties": {"arg": {"type": "string", "description": "Its argument."}},
        "required": ["arg"]}}} for n in names]


def write_run(sd: SweepDir, profile: str, qid: str, rep: int, question: str, gold: str, rng: random.Random) -> None:
    d = sd.run_dir(profile, qid, rep)
    names = PROFILES[profile]
    infra = rng.random() < 0.02
    turns = rng.randint(6, 20)
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    counts: dict[str, int] = {}
    with RunWriter(d) as w:
        w.write(StartEvent(question=question, profile=profile, model="bench-model",
                config={"model": {"model": "bench-model", "temperature": 1.0, "top_p": 0.95, "max_tokens": 16384},
                        "agent": {"max_turns": 300}},
                system_prompt=text(rng, 2500), tools=tools(names), run_id=f"{qid}-{profile}-r{rep}",
                reasoning_passback="auto", server={"context_window": 131072}))
        prompt = 900
        for t in range(1, turns + 1):
            last = t == turns
            if infra and last:
                w.write(ErrorEvent(turn=t, message="model endpoint unavailable: connection refused",
                        error_class="EndpointUnavailable"))
                break
            name = rng.choice(names)
            call_id = f"call_{t}_0"
            args = {"command": f"grep -n '{rng.choice(WORDS)}' /work/*.txt | head -n 40"} if name == "bash" else \
                {"arg": text(rng, 40)}
            comp = rng.randint(40, 400)
            prompt += comp
            u = {"prompt_tokens": prompt, "completion_tokens": comp, "total_tokens": prompt + comp}
            for k in usage:
                usage[k] += u[k]
            msg = {"role": "assistant", "content": f"<answer>{gold}</answer>" if last else text(rng, 120)}
            if not last:
                msg["tool_calls"] = [{"id": call_id, "type": "function",
                                      "function": {"name": name, "arguments": json.dumps(args)}}]
            w.write(ModelCallEvent(turn=t, latency_s=round(rng.uniform(0.5, 8), 3), usage=u, usage_details=u,
                    message=msg, finish_reason="stop" if last else "tool_calls", attempts=1,
                    request={"model": "bench-model", "temperature": 1.0, "max_tokens": 16384, "tools": names},
                    response={"id": f"chatcmpl-{qid}-{t}", "model": "bench-model"},
                    reasoning=text(rng, rng.randint(100, 1500)), reasoning_fields=["reasoning_content"]))
            if last:
                break
            size = min(24000, int(rng.lognormvariate(7.8, 1.0)))
            obs = text(rng, size)
            prompt += size // 4
            counts[name] = counts.get(name, 0) + 1
            w.write(ToolCallEvent(turn=t, id=call_id, name=name, arguments=args,
                    raw_arguments=msg["tool_calls"][0]["function"]["arguments"], observation=obs, error=False,
                    duration_s=round(rng.uniform(0.01, 2), 3),
                    meta={"exit_code": 0, "timed_out": False, "truncated": size >= 24000, "fetches": [], "searches": []}))
        stop = "endpoint_unavailable" if infra else "answer"
        answer = None if infra else gold
        w.write(EndEvent(stop_reason=stop, answer=answer, turns=t, wall_s=round(t * 3.1, 3)))
        w.write_result({"question": question, "answer": answer, "profile": profile, "model": "bench-model",
                        "turns": t, "stop_reason": stop, "tool_calls": counts, "usage": usage,
                        "summary_usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
                        "wall_s": round(t * 3.1, 3), "run_id": f"{qid}-{profile}-r{rep}",
                        "started_at": "2026-12-01T12:00:00+00:00", "meta": {"qid": qid, "rep": rep},
                        "config_digest": "0" * 64})
    if not infra:
        right = rng.random() < 0.5
        write_judgement(d, {"match": {"method": "match", "correct": right, "gold": gold, "answer": answer,
                                      "em": float(right), "f1": 1.0 if right else 0.25}})


def synthesize(out: Path, n: int, seed: int = 0) -> int:
    rng = random.Random(seed)
    sd = SweepDir(out)
    reps = 2
    questions = max(1, n // (len(PROFILES) * reps))
    rows = [{"id": f"q{i:05d}", "question": text(rng, 160) + "?", "answer": text(rng, 20), "meta": {}}
            for i in range(questions)]
    sd.write_questions(rows)
    sd.write_manifest({"dataset": {"kind": "hotpotqa", "source": "synthetic", "split": "dev"},
                       "bench": {"dataset": "hotpotqa:synthetic", "concurrency": 8}, "profiles": list(PROFILES),
                       "runs": reps, "status": "finished"})
    made = 0
    for rep in range(reps):
        for row in rows:
            for profile in PROFILES:
                write_run(sd, profile, row["id"], rep, row["question"], row["answer"], rng)
                made += 1
    return made


def du(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--keep", type=Path, default=None, help="Work here and keep the files (default: a temp dir).")
    a = ap.parse_args()
    root = a.keep or Path(tempfile.mkdtemp(prefix="fte-export-bench-"))
    sweep = root / "sweep"
    try:
        shutil.rmtree(sweep, ignore_errors=True)
        t = time.perf_counter()
        made = synthesize(sweep, a.runs)
        print(f"synthesized {made} runs ({du(sweep):.0f} MB) in {time.perf_counter() - t:.1f} s")
        t, c = time.perf_counter(), time.process_time()
        runs = read_runs([sweep])
        base, base_cpu = time.perf_counter() - t, time.process_time() - c
        print(f"baseline: reading every run record: {base:.2f} s ({base_cpu:.2f} s CPU)")
        for what, fn, out in [
            ("inspect .eval", lambda o: export_inspect([sweep], o, fmt="eval"), root / "inspect-eval"),
            ("inspect .json", lambda o: export_inspect([sweep], o, fmt="json"), root / "inspect-json"),
            ("atif", lambda o: export_atif([sweep], o), root / "atif"),
        ]:
            shutil.rmtree(out, ignore_errors=True)
            t, c = time.perf_counter(), time.process_time()
            files = fn(out)
            s, cpu = time.perf_counter() - t, time.process_time() - c
            print(f"export {what}: {s:.1f} s ({cpu:.1f} s CPU) for {len(runs)} runs ({len(files)} files, "
                  f"{du(out):.0f} MB); {s / base:.1f}x the baseline ({cpu / base_cpu:.1f}x in CPU time); "
                  f"goal < 60 s: {'met' if s < 60 else 'NOT met'}")
    finally:
        if a.keep is None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
