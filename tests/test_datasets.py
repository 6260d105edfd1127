"""Datasets: BrowseComp (a CSV encrypted here), generic JSONL, HotpotQA, selection and stable ids."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from fte_shell.benchmarks.base import question_id, select
from fte_shell.benchmarks.cipher import decrypt, derive_key, encrypt
from fte_shell.benchmarks.registry import load_dataset
from fte_shell.errors import ConfigError


def test_key_derivation() -> None:
    k = derive_key("canary", 70)
    assert len(k) == 70 and k[:32] == k[32:64] and k[64:] == k[:6]


def write_browsecomp(path: Path, rows: list[tuple[str, str, str, str]]) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["problem", "answer", "problem_topic", "canary"])
        for problem, answer, topic, canary in rows:
            w.writerow([encrypt(problem, canary), encrypt(answer, canary), topic, canary])


def test_browsecomp_csv(tmp_path: Path) -> None:
    p = tmp_path / "bc.csv"
    long_q = "Which café opened in 1923 and is named after a river? " * 3  # longer than one key block
    write_browsecomp(p, [(long_q, "Le Sèvres", "Travel", "BENCHMARK DATA canary GUID 1"),
                         ("Who?", "Nobody", "Art", "other canary")])
    assert decrypt(encrypt(long_q, "x"), "x") == long_q
    ds = load_dataset(str(p))
    assert ds.kind == "browsecomp"
    q = ds.questions[0]
    assert (q.question, q.answer, q.meta) == (long_q, "Le Sèvres", {"problem_topic": "Travel"})
    assert q.id == question_id(long_q) and len(q.id) == 16
    assert load_dataset(f"browsecomp:{p}").questions == ds.questions  # stable


def test_browsecomp_errors(tmp_path: Path) -> None:
    p = tmp_path / "bad.csv"
    p.write_text("problem,answer\nx,y\n")
    with pytest.raises(ConfigError, match="missing columns: canary"):
        load_dataset(str(p))
    p.write_text("problem,answer,canary\n!!!notbase64,y,c\n")
    with pytest.raises(ConfigError, match=r"bad.csv:2: cannot decrypt"):
        load_dataset(str(p))


def test_jsonl(tmp_path: Path) -> None:
    p = tmp_path / "qs.jsonl"
    rows = [{"id": "a/1", "question": "Q1", "answer": 3, "extra": "x"}, {"question": "Q2"}, {"id": "a/1", "question": "Q3"}]
    p.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    ds = load_dataset(str(p))
    assert [q.id for q in ds.questions] == ["a_1", question_id("Q2"), "a_1-2"]
    assert ds.questions[0].answer == "3" and ds.questions[0].meta == {"extra": "x"}
    assert ds.questions[1].answer is None
    p.write_text('{"question": "ok"}\n{"q": 1}\n')
    with pytest.raises(ConfigError, match=r"qs.jsonl:2: each line needs"):
        load_dataset(str(p))
    with pytest.raises(ConfigError, match="dataset not found"):
        load_dataset(str(tmp_path / "missing.jsonl"))


def test_select_sample_limit(tmp_path: Path) -> None:
    p = tmp_path / "qs.jsonl"
    p.write_text("".join(json.dumps({"id": str(i), "question": f"Q{i}"}) + "\n" for i in range(50)))
    a = load_dataset(str(p), sample=10, seed=3).questions
    b = load_dataset(str(p), sample=10, seed=3).questions
    c = load_dataset(str(p), sample=10, seed=4).questions
    assert a == b and a != c and len(a) == 10
    assert [int(q.id) for q in a] == sorted(int(q.id) for q in a)  # dataset order kept
    assert [q.id for q in load_dataset(str(p), sample=10, seed=3, limit=4).questions] == [q.id for q in a[:4]]
    assert len(load_dataset(str(p), limit=0).questions) == 0
    with pytest.raises(ConfigError, match="--limit"):
        select(a, limit=-1)


def test_hotpotqa(hotpotqa_dir: Path) -> None:
    dev = load_dataset(f"hotpotqa:{hotpotqa_dir}", limit=5)
    assert dev.kind == "hotpotqa" and dev.split == "dev" and len(dev.questions) == 5
    first = json.loads((hotpotqa_dir / "dev.jsonl").open().readline())
    assert dev.questions[0].id == first["_id"] and dev.questions[0].answer == first["answer"]
    assert load_dataset(str(hotpotqa_dir), split="test", limit=1).questions[0].id != dev.questions[0].id
    with pytest.raises(ConfigError, match="split 'train' not found"):
        load_dataset(str(hotpotqa_dir), split="train")
