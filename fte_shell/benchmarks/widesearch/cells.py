"""WideSearch's per-column preprocessors and cell metrics (the benchmark's names and semantics).

Preprocessors map cell text to cell text: ``norm_str`` (lower case, spaces and ``*`` removed),
``extract_number`` (the first number, commas dropped, a trailing ``%`` kept; ``NULL`` when there is none),
``norm_date`` (``YYYY-MM-DD`` when dateparser reads a date, first day of the month when none is given;
the text unchanged otherwise).

Metrics score a response cell against its gold cell, 1.0 or 0.0, with a short reason:
``exact_match`` (equal ignoring case), ``number_near`` (|r - t| <= criterion * |t|, a ``%`` value divided by
100; two unreadable cells score 1 only when their text is equal), ``date_near`` (at most 31 days apart; two
unreadable dates score 1), ``url_match`` (the same set of URL host names), ``in_match`` (the response is a
substring of the gold cell). ``llm_judge`` is scored a column at a time by the judge model
(:mod:`.align`).
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Callable
from functools import lru_cache
from urllib.parse import urlparse

_NUMBER = re.compile(r"[-+]?\d*\.\d+%?|[-+]?\d+\.?\d*%?")
_URL = re.compile(r"https?://[A-Za-z0-9$%&'()*+,\-./:;<=>?@\[\]\\^_!]+")
DATE_DAYS = 31
"""``date_near``: the largest distance in days that still matches."""


def norm_str(value: str) -> str:
    return value.lower().strip().replace(" ", "").replace("*", "")


def extract_number(value: str) -> str:
    found = _NUMBER.findall(value.replace(",", ""))
    return found[0] if found else "NULL"


@lru_cache(maxsize=4096)
def parse_date(value: str) -> _dt.datetime | None:
    """dateparser's reading of ``value`` (first day of the month when no day is given), or None."""
    import dateparser  # lazily: importing it takes a moment

    try:
        return dateparser.parse(value, settings={"PREFER_DAY_OF_MONTH": "first"})
    except Exception:  # noqa: BLE001 - dateparser raises assorted errors on odd input: unreadable
        return None


def norm_date(value: str) -> str:
    d = parse_date(value)
    return value if d is None else d.strftime("%Y-%m-%d")


PREPROCESSORS: dict[str, Callable[[str], str]] = {
    "norm_str": norm_str,
    "extract_number": extract_number,
    "norm_date": norm_date,
}

Score = tuple[float, str]


def exact_match(response: str, target: str, criterion: object = None) -> Score:
    if response.lower() == target.lower():
        return 1.0, "equal"
    return 0.0, "not equal"


def _as_number(text: str) -> float | None:
    try:
        return float(text.replace("%", "")) / 100.0 if "%" in text else float(text)
    except ValueError:
        return None


def number_near(response: str, target: str, criterion: object = None) -> Score:
    tol = float(criterion) if isinstance(criterion, (int, float, str)) and str(criterion).strip() else 0.0
    r, t = _as_number(response), _as_number(target)
    if r is None or t is None:
        if r is None and t is None and response == target:
            return 1.0, "no number on either side, same text"
        return 0.0, "not a number"
    if abs(r - t) <= abs(t) * tol:
        return 1.0, f"within {tol:g} of the gold value"
    return 0.0, f"{r:g} is not within {tol:g} of {t:g}"


def date_near(response: str, target: str, criterion: object = None) -> Score:
    r, t = parse_date(response), parse_date(target)
    if r is None or t is None:
        if r is None and t is None:
            return 1.0, "no date on either side"
        return 0.0, "not a date"
    try:
        days = abs((r - t).days)
    except TypeError:  # one side carries a time zone, the other does not
        days = abs((r.replace(tzinfo=None) - t.replace(tzinfo=None)).days)
    if days <= DATE_DAYS:
        return 1.0, f"{days} days apart"
    return 0.0, f"{days} days apart"


def _hosts(text: str) -> set[str]:
    return {urlparse(u).netloc for u in _URL.findall(text)}


def url_match(response: str, target: str, criterion: object = None) -> Score:
    if _hosts(response) == _hosts(target):
        return 1.0, "same hosts"
    return 0.0, "different hosts"


def in_match(response: str, target: str, criterion: object = None) -> Score:
    if response in target:
        return 1.0, "response inside the gold cell"
    return 0.0, "response not inside the gold cell"


CELL_METRICS: dict[str, Callable[[str, str, object], Score]] = {
    "exact_match": exact_match,
    "number_near": number_near,
    "date_near": date_near,
    "url_match": url_match,
    "in_match": in_match,
}
METRICS = frozenset({*CELL_METRICS, "llm_judge"})
"""Every metric name a task may use."""
