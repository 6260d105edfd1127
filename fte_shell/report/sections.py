"""The report's general sections: each builder takes the :class:`~fte_shell.benchmarks.sections.ReportData`
and returns a :class:`~fte_shell.benchmarks.sections.Section` (or None to leave it out).
``fte_shell.report.build.sections`` lays them out with the benchmarks' own sections
(:meth:`fte_shell.benchmarks.base.Benchmark.report_sections`). Every number is defined in docs/metrics.md.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..benchmarks.sections import ReportData, Section, Table, ci, integer, num, pct, pcts, pvalue
from ..metrics import ProfileSummary
from ..metrics.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, Paired, Repetitions
from ..model.prices import usd
from ..stops import STOPS

OPS = ["search", "fetch", "visit", "open", "grep", "read", "find", "list", "other"]


def display_name(p: ProfileSummary) -> str:
    """The main table's profile cell: the profile, plus the retriever and the context strategy when the runs
    compare several, plus the config digest when runs were split by it."""
    return (p.profile + (f" · {p.retriever}" if p.retriever else "") + (f" · {p.context}" if p.context else "")
            + (f" · cfg {p.config_digest[:8]}" if p.config_digest else ""))


def has_reader_tokens(ps: Sequence[ProfileSummary]) -> bool:
    """Whether any profile spent reader-model tokens (visit-summary): only then are they shown."""
    return any(p.summary_tokens for p in ps)


def has_cost(ps: Sequence[ProfileSummary]) -> bool:
    """Whether any profile's runs have a cost (a known price): only then are the cost columns shown."""
    return any(p.cost_usd is not None for p in ps)


COST_COLUMNS = ["Cost", "Cost/run", "Cost/correct"]


# --- tables -------------------------------------------------------------------------------------------
def main_table(ps: Sequence[ProfileSummary]) -> Table:
    reader, cost = has_reader_tokens(ps), has_cost(ps)
    head = ["Profile", "Model", "Runs", "Failed (infra)", "Judged", "Accuracy", "95% CI (Wilson)", "F1", "Answered",
            "#Search", "#Select", "#Extract", "Calls", "Refused", "Tokens", *(["Reader tokens"] if reader else []),
            *(COST_COLUMNS if cost else []), "Wall s"]
    rows = [[display_name(p), p.model or "–", str(p.runs), str(p.failed), str(p.judged), pct(p.accuracy),
             ci(p.accuracy_ci95), num(p.f1), pct(p.answered), num(p.search), num(p.select), num(p.extract),
             num(p.calls), num(p.refused), integer(p.tokens), *([integer(p.summary_tokens)] if reader else []),
             *([usd(p.cost_usd), usd(p.cost_per_run), usd(p.cost_per_correct)] if cost else []),
             num(p.wall_s, 1)] for p in ps]
    return head, rows


def distribution_table(ps: Sequence[ProfileSummary]) -> Table:
    used = [op for op in OPS if any(p.distribution.get(op) for p in ps)]
    head = ["Profile", *used]
    rows = [[p.label, *[pct(p.distribution.get(op, 0.0)) for op in used]] for p in ps]
    return head, rows


def behaviour_table(ps: Sequence[ProfileSummary]) -> Table:
    head = ["Profile", "Revisit rate", "grep:read", "Whole-cache grep", "Fetch repeat", "Cache files",
            "Cache chars", "#grep", "#read"]
    rows = [[p.label, pct(p.revisit_rate), num(p.grep_read_ratio), pct(p.whole_cache_grep_share),
             "–" if p.fetch_repeat_pct is None else f"{p.fetch_repeat_pct:.1f}%", num(p.cache_files, 1),
             integer(p.cache_chars), num(p.grep), num(p.read)] for p in ps]
    return head, rows


def per_question_calls_table(ps: Sequence[ProfileSummary]) -> Table:
    """Table 3: per-question tool use and the cache."""
    head = ["Profile", "search", "fetch", "grep", "read", "list_fetched", "Cache files", "Cache chars",
            "grep:read", "Whole-cache grep (questions)"]
    rows = [[p.label, num(p.search), num(p.fetch), num(p.grep), num(p.read), num(p.list), num(p.cache_files, 1),
             integer(p.cache_chars), num(p.grep_read_ratio), pct(p.whole_cache_grep_share)] for p in ps]
    return head, rows


def grep_table(ps: Sequence[ProfileSummary]) -> Table:
    """Table 7: grep patterns and scopes."""
    head = ["Profile", "Pattern chars p25", "p50", "p75", "p90", "Regex metachar", "Whole-cache calls",
            "Single-file calls"]
    rows = [[p.label, *pcts(p.grep_pattern_chars), pct(p.grep_regex_share), pct(p.grep_whole_cache_call_share),
             pct(p.grep_single_file_call_share)] for p in ps]
    return head, rows


def read_table(ps: Sequence[ProfileSummary]) -> Table:
    """Table 8: explicit read windows."""
    head = ["Profile", "With offset", "Offset p50", "Offset p90", "With limit", "Limit p50", "Limit p90"]
    rows = [[p.label, pct(p.read_offset_share), *pcts(p.read_offsets, ("p50", "p90")), pct(p.read_limit_share),
             *pcts(p.read_limits, ("p50", "p90"))] for p in ps]
    return head, rows


def ngram_table(ps: Sequence[ProfileSummary]) -> Table:
    """Table 9: top n-grams with their count and share of all n-grams."""
    def cells(counts: list[tuple[str, int]], shares: list[tuple[str, float]]) -> str:
        share = dict(shares)
        return ", ".join(f"{k} ({v}, {share.get(k, 0.0):.1f}%)" for k, v in counts[:5]) or "–"

    head = ["Profile", "Top bigrams (count, % of all)", "Top trigrams (count, % of all)"]
    rows = [[p.label, cells(p.bigrams, p.bigram_pct), cells(p.trigrams, p.trigram_pct)] for p in ps]
    return head, rows


def fetch_table(ps: Sequence[ProfileSummary]) -> Table:
    """Table 10: fetch repeats."""
    head = ["Profile", "Fetches", "Unique fetches", "Repeated fetches", "Fetch repeat %"]
    rows = [[p.label, num(p.fetch), num(p.unique_fetches), num(p.repeated_fetches),
             "–" if p.fetch_repeat_pct is None else f"{p.fetch_repeat_pct:.1f}%"] for p in ps]
    return head, rows


def stops_table(ps: Sequence[ProfileSummary]) -> Table:
    """Runs that are results per stop reason (the reasons some row has), and the stuck detector's notices."""
    used = [x.name for x in STOPS if any(p.stops.get(x.name) for p in ps)]
    stuck = any(p.stuck_noticed for p in ps)
    head = ["Profile", "Results", *used, *(["Stuck notice (runs)", "Went on after notice"] if stuck else [])]
    rows = [[p.label, str(p.runs - p.failed), *[str(p.stops.get(n, 0)) for n in used],
             *([str(p.stuck_noticed), str(p.stuck_went_on)] if stuck else [])] for p in ps]
    return head, rows


def paired_table(pairs: Sequence[Paired]) -> Table:
    head = ["A", "B", "n", "A only", "B only", "A − B", "95% CI (paired bootstrap)", "McNemar p (exact)"]
    rows = [[x.a, x.b, str(x.n), str(x.a_only), str(x.b_only),
             "–" if x.diff is None else f"{100 * x.diff:+.1f} pp", ci(x.diff_ci95), pvalue(x.p_value)]
            for x in pairs]
    return head, rows


def repetitions_table(reps: Sequence[Repetitions]) -> Table:
    head = ["Profile", "K", "Accuracy per run", "Avg@K ± sd", "Best@K", "Pass@K"]
    rows = [[r.label, str(r.k), ", ".join(pct(x) for x in r.per_rep),
             f"{pct(r.mean)} ± {'–' if r.sd is None else f'{100 * r.sd:.1f}'}", pct(r.best_of_k), pct(r.pass_at_k)]
            for r in reps]
    return head, rows


# --- builders -----------------------------------------------------------------------------------------
def main_section(d: ReportData) -> Section:
    notes = [
        ("Accuracy: share of judged runs judged correct by their primary verdict (the judge that graded them last; "
        "a grading model's verdict wins over a model-free one; the Judges section names it); 95% CI: Wilson score "
        "interval over the judged runs."),
        ("Failed (infra): runs whose stop reason is an infrastructure failure (or that have no result.json): "
        "not results, left out of every score and mean."),
    ]
    return Section("Main results (per question, averaged)", [main_table(d.profiles)], notes)


def repetitions_section(d: ReportData) -> Section | None:
    if not d.repetitions:
        return None
    notes = [("Avg@K ± sd: mean ± sample sd of the per-repetition accuracies; Best@K: the best repetition's accuracy "
             "(the paper reports the best of three); Pass@K: share of questions some repetition got right. By each "
             "run's primary verdict; the Judges section gives them under each judge.")]
    return Section("Repetitions", [repetitions_table(d.repetitions)], notes)


def paired_section(d: ReportData) -> Section | None:
    if not d.paired:
        return None
    notes = [(f"Pairs: the (question, repetition) pairs judged in both. A − B: accuracy difference; 95% CI: paired "
             f"bootstrap over questions ({BOOTSTRAP_RESAMPLES:,} resamples, seed {BOOTSTRAP_SEED}); p: exact "
             "McNemar test (two-sided binomial of A only vs B only).")]
    return Section("Paired comparisons", [paired_table(d.paired)], notes)


def stops_section(d: ReportData) -> Section | None:
    if not any(p.stops for p in d.profiles):
        return None
    notes = [("Stops: the runs that are results, by stop reason (fte_shell/stops.py; every one but answer is scored "
             "unanswered). Stuck notice: runs told that their last agent.stuck_repeats tool calls were the same call "
             "with the same observation; went on: of those, the runs that did not end stuck.")]
    return Section("Stops", [stops_table(d.profiles)], notes)


def behaviour_section(d: ReportData) -> Section:
    return Section("Behaviour", [distribution_table(d.profiles), behaviour_table(d.profiles)],
                   [("Tool-call distribution: share of each op among all actions. Revisit rate: share of materialized "
                    "documents (fetched, opened or visited) extracted from again after a different document was "
                    "touched in between.")])


def analysis_section(d: ReportData) -> Section:
    ps = d.profiles
    return Section("Analysis tables (paper Tables 3, 7, 8, 9, 10)",
                   [per_question_calls_table(ps), grep_table(ps), read_table(ps), ngram_table(ps), fetch_table(ps)],
                   [("Percentiles: linear interpolation between order statistics. Pattern chars: length of each grep "
                    "pattern. Whole-cache / single-file calls: share of grep actions by scope.")])
