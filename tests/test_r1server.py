"""The Search-R1 endpoint: the exact requests the RL recipes send (Search-R1's rollout, verl's search_r1_like
tool, SkyRL's search env, slime's local search, verifiers' vf_search_r1), over a real corpus directory and a
dense retriever on a loopback embeddings endpoint; bad requests get HTTP errors and the server lives on."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from fte_shell.config import SearchConfig
from fte_shell.search import LocalCorpus
from fte_shell.search.corpus import CorpusDoc, build_corpus
from fte_shell.search.r1server import R1Server, document
from fte_shell.search.retrievers.base import RetrieverSpec
from fte_shell.search.retrievers.dense import KIND
from tests.embed_server import FakeEmbeddings
from tests.test_dense_retriever import Texts, expected

REPO = Path(__file__).resolve().parent.parent
DOCS = [
    CorpusDoc(docid="paris", title="Paris", text="Paris is the capital and largest city of France."),
    CorpusDoc(docid="berlin", title="Berlin", text="Berlin is the capital of Germany.\nIt has 3.7 million people."),
    CorpusDoc(docid="python", title="Python (language)", text="Python is a programming language."),
    CorpusDoc(docid="seine", title="Seine", text="The Seine is a river that flows through Paris."),
]
PAIRS = [(d.docid, d.text) for d in DOCS]
TITLES = {d.docid: d.title for d in DOCS}
DIM = 16


@pytest.fixture()
def served(tmp_path: Path):
    corpus_dir = build_corpus(DOCS, tmp_path / "corpus")
    with FakeEmbeddings(dim=DIM) as emb:
        cfg = SearchConfig.model_validate({"embeddings": {"base_url": emb.base_url, "max_retries": 0}})
        spec = RetrieverSpec("dense", "openai:m", "dense:openai:m")
        index = tmp_path / "index"
        index.mkdir()
        KIND.build(spec, Texts(PAIRS), index, cfg)
        retriever = KIND.open(spec, index, cfg)
        docs = LocalCorpus(corpus_dir)
        server = R1Server(retriever, docs.get, port=0, docs=len(docs)).start()
        try:
            yield server, emb
        finally:
            server.close()
            retriever.close()
            docs.close()


def ranked(query: str, k: int) -> list[str]:
    return [d for d, _ in expected(query, PAIRS, DIM)[:k]]


def test_search_r1_rollout_request(served) -> None:
    """search_r1/llm_agent/generation.py: _batch_search posts {queries, topk, return_scores: True} with
    requests.post(url, json=payload).json() and _passages2string reads doc['document']['contents']."""
    server, _ = served
    queries = ["capital of France", "river through Paris"]
    res = requests.post(server.url, json={"queries": queries, "topk": 3, "return_scores": True}).json()
    assert list(res) == ["result"] and len(res["result"]) == 2
    for q, items in zip(queries, res["result"], strict=True):
        assert [i["document"]["id"] for i in items] == ranked(q, 3)
        want = {d: s for d, s in expected(q, PAIRS, DIM)}
        assert [i["score"] for i in items] == pytest.approx([want[i["document"]["id"]] for i in items], abs=1e-5)
        first = items[0]["document"]
        content = first["contents"]
        title, text = content.split("\n")[0], "\n".join(content.split("\n")[1:])
        assert title == f'"{TITLES[first["id"]]}"'  # Search-R1's wiki-18 shape: the title quoted on line 1
        assert text == next(d.text for d in DOCS if d.docid == first["id"])
        assert first["title"] == TITLES[first["id"]] and first["text"] == text
    # a document whose text has several lines keeps them all after the title line
    berlin = requests.post(server.url, json={"queries": ["Germany capital"], "topk": 4, "return_scores": True})
    doc = next(i["document"] for i in berlin.json()["result"][0] if i["document"]["id"] == "berlin")
    assert doc["contents"] == '"Berlin"\nBerlin is the capital of Germany.\nIt has 3.7 million people.'


def test_verl_and_skyrl_requests(served) -> None:
    """verl/tools/utils/search_r1_like_utils.py and skyrl_gym/tools/search.py: the same payload with JSON
    headers (SkyRL through a pooled Session), raise_for_status, then result[i][j]['document']['contents']."""
    server, _ = served
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    payload = {"queries": ["programming language"], "topk": 3, "return_scores": True}
    r = requests.post(server.url, headers=headers, json=payload, timeout=30)
    r.raise_for_status()
    with requests.Session() as session:
        r2 = session.post(server.url, headers=headers, json=payload, timeout=30)
        r3 = session.post(server.url, headers=headers, json=payload, timeout=30)  # keep-alive reuse
    assert r.json() == r2.json() == r3.json()
    passages = [item["document"]["contents"] for item in r.json()["result"][0]]
    assert passages[0] == '"Python (language)"\nPython is a programming language.'
    assert len(passages) == 3


def test_slime_and_verifiers_requests(served) -> None:
    """slime's local_search (aiohttp, return_scores False: result[0] items are documents with 'contents')
    and verifiers' vf_search_r1 (requests, return_scores True, .get('document', {}).get('contents'))."""
    server, _ = served
    import aiohttp

    async def slime() -> dict:
        async with aiohttp.ClientSession() as session:
            payload = {"queries": ["capital of Germany"], "topk": 2, "return_scores": False}
            async with session.post(server.url, json=payload, timeout=aiohttp.ClientTimeout(total=60)) as resp:
                resp.raise_for_status()
                return await resp.json()

    res = asyncio.run(slime())
    items = res["result"][0]
    assert [i["id"] for i in items] == ranked("capital of Germany", 2)
    assert all(set(i) == {"id", "contents", "title", "text"} for i in items)  # documents, no score wrapper

    resp = requests.post(server.url, json={"queries": ["capital of France"], "topk": 1, "return_scores": True},
                         timeout=10)
    resp.raise_for_status()
    first = resp.json().get("result", [])[0]
    assert [d.get("document", {}).get("contents", "") for d in first] == [
        document(next(d for d in DOCS if d.docid == ranked("capital of France", 1)[0]))["contents"]
    ]


def test_defaults_and_bad_requests(served) -> None:
    server, emb = served
    # topk left out or null: the server's default (3); return_scores left out: plain documents
    assert [len(r) for r in requests.post(server.url, json={"queries": ["a", "b"]}).json()["result"]] == [3, 3]
    assert len(requests.post(server.url, json={"queries": ["a"], "topk": None}).json()["result"][0]) == 3
    assert requests.post(server.url, json={"queries": [], "topk": 2}).json() == {"result": []}
    assert len(requests.post(server.url, json={"queries": ["a"], "topk": 50}).json()["result"][0]) == len(DOCS)

    bad = [
        (b"not json", 422, "not JSON"),
        (json.dumps(["a"]).encode(), 422, "JSON object"),
        (json.dumps({"topk": 3}).encode(), 422, "'queries' must be a list"),
        (json.dumps({"queries": "one string"}).encode(), 422, "'queries' must be a list"),
        (json.dumps({"queries": ["a"], "topk": -1}).encode(), 422, "'topk'"),
        (json.dumps({"queries": ["a"], "topk": "3"}).encode(), 422, "'topk'"),
        (json.dumps({"queries": ["a"], "return_scores": "yes"}).encode(), 422, "'return_scores'"),
    ]
    for body, status, detail in bad:
        r = requests.post(server.url, data=body, headers={"Content-Type": "application/json"})
        assert r.status_code == status and detail in r.json()["detail"], (body, r.status_code, r.text)
    assert requests.get(server.url).status_code == 405
    assert requests.post(server.url.replace("/retrieve", "/search"), json={"queries": ["a"]}).status_code == 404
    health = requests.get(server.url.replace("/retrieve", "/health")).json()
    assert health == {"status": "ok", "retriever": "dense:openai:m", "docs": len(DOCS)}

    with socket.create_connection(server.httpd.server_address[:2]) as s:  # a huge body is refused unread
        s.sendall(b"POST /retrieve HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999\r\n\r\n")
        assert s.recv(200).startswith(b"HTTP/1.1 413")

    emb.queue = [503]  # the embeddings endpoint fails: 503 (the recipes retry), and the server lives on
    r = requests.post(server.url, json={"queries": ["capital"], "topk": 1})
    assert r.status_code == 503 and "embeddings endpoint" in r.json()["detail"]
    assert requests.post(server.url, json={"queries": ["capital"], "topk": 1}).status_code == 200


def test_cli_serve(tmp_path: Path) -> None:
    """`fte-shell corpus serve DIR --retriever dense:openai:m --port 0` prints its address and answers."""
    from fte_shell.search import retrievers

    if not hasattr(retrievers, "open_retriever"):
        pytest.skip("needs the retriever registry (fte_shell/search/retrievers/__init__.py from branch seam)")
    corpus_dir = build_corpus(DOCS, tmp_path / "corpus")
    with FakeEmbeddings(dim=DIM) as emb:
        conf = tmp_path / "fte.toml"
        conf.write_text(f'[search.embeddings]\nbase_url = "{emb.base_url}"\n')
        proc = subprocess.Popen(
            [sys.executable, "-m", "fte_shell", "corpus", "serve", str(corpus_dir), "--retriever", "dense:openai:m",
             "--port", "0", "--config", str(conf)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        try:
            line = proc.stdout.readline()
            assert line.startswith("serving dense:openai:m over"), (line, proc.stderr.read() if proc.poll() else "")
            url = line.rsplit(" at ", 1)[1].strip()
            assert url.startswith("http://127.0.0.1:") and url.endswith("/retrieve")
            res = requests.post(url, json={"queries": ["capital of France"], "topk": 2, "return_scores": True}).json()
            indexed = [(d.docid, f"{d.title}\n{d.text}") for d in DOCS]  # a titled corpus indexes title+text
            assert [i["document"]["id"] for i in res["result"][0]] == [
                d for d, _ in expected("capital of France", indexed, DIM)[:2]
            ]
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    bad = subprocess.run(
        [sys.executable, "-m", "fte_shell", "corpus", "serve", str(tmp_path / "nowhere"), "--retriever", "bm25s"],
        capture_output=True, text=True, check=False, env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert bad.returncode == 1 and "error:" in bad.stderr and "Traceback" not in bad.stderr
