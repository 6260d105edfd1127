"""Serper (google.serper.dev) web search: POST ``{q, num}`` with header ``X-API-KEY``.

The key stays on the host: only the gateway (host side) and the structured profile call this backend.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx

from ..config.secrets import secret_variable
from ..errors import SearchUnavailable
from .base import SearchResult, Secret, keep_exchange
from .retry import post_retrying

if TYPE_CHECKING:  # pragma: no cover
    from ..config import SearchConfig

NO_KEY = (
    "Serper search needs an API key: set SERPER_API_KEY or [search] serper_api_key, "
    "or use a local corpus ([search] backend = \"local\", corpus = DIR; see `fte-shell corpus build`)"
)


DEFAULT_URL = "https://google.serper.dev/search"

def serper_name(url: str) -> str:
    """The name searches at ``url`` are recorded under: ``serper``, or ``serper@HOST:PORT`` for another
    endpoint, so result caches of different endpoints never mix."""
    return "serper" if url == DEFAULT_URL else f"serper@{urlsplit(url).netloc or url}"


class SerperSearch:
    """A :class:`~fte_shell.search.base.SearchBackend` over the Serper API (or anything speaking its
    shape, e.g. a loopback test server). ``name``: :func:`serper_name`."""

    def __init__(
        self,
        api_key: str | None = None,
        *,
        url: str = DEFAULT_URL,
        timeout_s: float = 20.0,
        max_retries: int = 3,
        backoff_s: float = 1.0,
    ) -> None:
        key = api_key if api_key is not None else os.environ.get(SECRET.env)
        if not key:
            raise SearchUnavailable(NO_KEY)
        self._key = key
        self.url = url
        self.name = serper_name(url)
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self._client = httpx.Client(timeout=timeout_s, follow_redirects=False, trust_env=False)

    def __repr__(self) -> str:  # never show the key
        return f"SerperSearch(url={self.url!r})"

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()

    def search(self, query: str, n: int) -> list[SearchResult]:
        """Query Serper; retries 429/5xx/connection errors with exponential backoff and jitter.

        Raises :class:`SearchUnavailable` (one line) on a bad key, an unreachable endpoint, a non-JSON
        answer or when retries are exhausted."""
        n = max(1, min(int(n), 100))
        body = {"q": query, "num": n}
        headers = {"X-API-KEY": self._key, "Content-Type": "application/json"}
        resp = post_retrying(self._client, self.url, name="Serper", body=body, headers=headers,
                             retries=self.max_retries, backoff_s=self.backoff_s,
                             gave_up=lambda last, attempts: f"{last}; gave up after {attempts} attempts")
        if resp.status_code in (401, 403):
            raise SearchUnavailable(
                f"Serper rejected the API key (HTTP {resp.status_code}): check SERPER_API_KEY "
                "or [search] serper_api_key"
            )
        if resp.status_code != 200:
            raise SearchUnavailable(f"Serper answered HTTP {resp.status_code} ({self.url})")
        try:
            data = resp.json()
        except ValueError as e:
            raise SearchUnavailable(f"Serper answered with something that is not JSON ({self.url})") from e
        results = parse_organic(data, n)
        keep_exchange(resp.request, resp)  # for the snapshot's WARC records, when it asked
        return results


def parse_organic(data: object, n: int) -> list[SearchResult]:
    """Turn a Serper answer (``{"organic": [{title, link, snippet, date?, position}]}``) into results,
    ranked 1..k in the order of ``position`` (entries without a link are skipped)."""
    if not isinstance(data, dict):
        raise SearchUnavailable("Serper answer is not a JSON object")
    organic = data.get("organic") or []
    if not isinstance(organic, list):
        raise SearchUnavailable("Serper answer has a malformed 'organic' list")
    items = [o for o in organic if isinstance(o, dict) and isinstance(o.get("link"), str) and o["link"]]
    items.sort(key=lambda o: o["position"] if isinstance(o.get("position"), int) else 10**9)
    out: list[SearchResult] = []
    for o in items[:n]:
        date = o.get("date")
        out.append(
            SearchResult(
                rank=len(out) + 1,
                title=str(o.get("title") or ""),
                url=o["link"],
                snippet=str(o.get("snippet") or ""),
                date=str(date) if date else None,
            )
        )
    return out


SECRET = Secret(secret_variable("search", "serper_api_key"), "serper_api_key")  # its row of config.SECRETS


class SerperPlugin:
    """The ``serper`` search backend plugin (:mod:`fte_shell.search.registry`)."""

    name = "serper"
    config_keys = ("serper_api_key", "serper_url", "timeout_s", "max_retries", "num_results", "cache_dir")
    secrets = (SECRET,)
    remote = True

    def usable(self, cfg: SearchConfig) -> bool:
        from .registry import secret_value

        return secret_value(cfg, SECRET) is not None

    def recorded_name(self, cfg: SearchConfig) -> str:
        return serper_name(cfg.serper_url)

    def search_params(self, query: str, n: int) -> dict[str, Any]:
        """Serper's body: ``{q, num}`` (num clamped to 1..100 as sent)."""
        return {"num": max(1, min(int(n), 100)), "q": query}

    def probe(self, cfg: SearchConfig, timeout_s: float) -> str | None:
        """Its endpoint answers an HTTP request (not a 502/503/504; a GET spends no query)."""
        try:
            r = httpx.get(cfg.serper_url, timeout=timeout_s)
        except httpx.HTTPError as e:
            return f"GET {cfg.serper_url}: {e.__class__.__name__}: {e}"
        # any answer but a gateway/overload status means the backend is up (a GET on Serper's POST-only
        # endpoint may well be 404, 405 or 501)
        return f"GET {cfg.serper_url}: HTTP {r.status_code}" if r.status_code in (502, 503, 504) else None

    def build(self, cfg: SearchConfig) -> SerperSearch:
        from .registry import secret_value

        return SerperSearch(secret_value(cfg, SECRET), url=cfg.serper_url, timeout_s=cfg.timeout_s,
                            max_retries=cfg.max_retries)

    def describe(self, cfg: SearchConfig) -> str:
        if not self.usable(cfg):
            return "search: Serper was asked for, but no SERPER_API_KEY is set"
        return "search: Serper (web)"


PLUGIN = SerperPlugin()
