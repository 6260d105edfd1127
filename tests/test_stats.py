"""Statistics on hand-made runs with hand-computed values: Wilson intervals, exact McNemar, the paired
bootstrap (reproducible, fixed seed), repetitions (mean ± sd, best-of-K, pass@K), and their names in
metrics.json / report.md."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_paper_metrics import mk_run

from fte_shell.metrics import collect
from fte_shell.metrics.stats import cohen_kappa, mcnemar_exact, paired, paired_bootstrap, repetitions, wilson
from fte_shell.report.build import write_report


def test_wilson_by_hand() -> None:
    # 5/10: centre 0.5, half = 1.96·sqrt(0.025 + 3.8415/400) / (1 + 3.8415/10) = 0.2634
    lo, hi = wilson(5, 10)  # type: ignore[misc]
    assert (lo, hi) == (pytest.approx(0.2366, abs=1e-4), pytest.approx(0.7634, abs=1e-4))
    # 3/4: centre (0.75 + 0.4802) / 1.9604 = 0.6275, half 1.96·sqrt(0.046875 + 0.060023) / 1.9604 = 0.3269
    lo, hi = wilson(3, 4)  # type: ignore[misc]
    assert (lo, hi) == (pytest.approx(0.3006, abs=1e-4), pytest.approx(0.9544, abs=1e-4))
    assert wilson(0, 10)[0] == 0.0 and wilson(0, 0) is None  # type: ignore[index]


@pytest.mark.parametrize("n", range(1, 501))
def test_wilson_holds_a_null_and_a_perfect_estimate(n: int) -> None:
    """At 0/n and n/n the floating-point bounds land a hair inside the estimate (5.6e-17 at 0/3): clamped,
    the interval always contains it and stays in [0, 1], so an error bar is never negative."""
    for k in (0, n):
        lo, hi = wilson(k, n)  # type: ignore[misc]
        p = k / n
        assert 0.0 <= lo <= p <= hi <= 1.0, (k, n, lo, hi)
    assert wilson(0, n)[0] == 0.0 and wilson(n, n)[1] == 1.0  # type: ignore[index]


def test_wilson_contains_every_estimate() -> None:
    for n in range(1, 201):
        for k in range(n + 1):
            lo, hi = wilson(k, n)  # type: ignore[misc]
            assert 0.0 <= lo <= k / n <= hi <= 1.0, (k, n)


def test_mcnemar_exact_by_hand() -> None:
    assert mcnemar_exact(0, 5) == pytest.approx(2 / 32)  # 2 · 0.5^5
    assert mcnemar_exact(1, 6) == pytest.approx(2 * 8 / 128)  # 2 · (1 + 7) / 2^7
    assert mcnemar_exact(3, 3) == 1.0 and mcnemar_exact(0, 0) == 1.0


def test_paired_bootstrap_by_hand_and_reproducible() -> None:
    # every difference 1 → every resample mean 1
    assert paired_bootstrap([[1.0]] * 5) == (1.0, 1.0)
    # two questions with differences 1 and 0: resample means 0 (p 1/4), 0.5 (1/2), 1 (1/4) → [0, 1]
    assert paired_bootstrap([[1.0], [0.0]]) == (0.0, 1.0)
    data = [[1.0], [0.0], [-1.0], [1.0], [0.0, 1.0]]
    assert paired_bootstrap(data) == paired_bootstrap(data)  # fixed seed
    assert paired_bootstrap([]) is None


def four_questions(root: Path) -> None:
    """fte right on q1-q3, shell right on q1 and q4; q5 only fte has (not paired)."""
    for q, f, s in [("q1", True, True), ("q2", True, False), ("q3", True, False), ("q4", False, True)]:
        mk_run(root / "runs" / "fte" / q / "r0", "fte", [], correct=f)
        mk_run(root / "runs" / "shell" / q / "r0", "shell", [], correct=s)
    mk_run(root / "runs" / "fte" / "q5" / "r0", "fte", [], correct=False)


def test_paired_comparison_by_hand(tmp_path: Path) -> None:
    four_questions(tmp_path)
    runs = collect([tmp_path])
    fte = [r for r in runs if r.profile == "fte"]
    shell = [r for r in runs if r.profile == "shell"]
    x = paired("fte", fte, "shell", shell)
    # 4 pairs; fte only q2, q3; shell only q4 → diff (2 − 1)/4; p = 2 · P(X ≤ 1 | n=3) = 2 · 4/8 = 1
    assert (x.n, x.a_only, x.b_only, x.diff, x.p_value) == (4, 2, 1, 0.25, 1.0)
    lo, hi = x.diff_ci95  # type: ignore[misc]
    assert -1.0 <= lo <= 0.25 <= hi <= 1.0


def test_repetitions_by_hand(tmp_path: Path) -> None:
    root = tmp_path / "runs" / "fte"
    for q, rep, ok in [("q1", 0, True), ("q2", 0, False), ("q1", 1, False), ("q2", 1, False)]:
        mk_run(root / q / f"r{rep}", "fte", [], correct=ok)
    r = repetitions("fte", collect([tmp_path]))
    assert r is not None
    # r0: 1/2, r1: 0/2 → mean 0.25, sd sqrt(2 · 0.25² / 1) = 0.3536; best 0.5; pass@2: q1 yes, q2 no → 0.5
    assert (r.k, r.per_rep, r.mean, r.best_of_k, r.pass_at_k) == (2, [0.5, 0.0], 0.25, 0.5, 0.5)
    assert r.sd == pytest.approx(0.353553, abs=1e-6)
    assert repetitions("fte", [x for x in collect([tmp_path]) if x.rep == 0]) is None
    rep = write_report([tmp_path], tmp_path / "out")
    md = rep.markdown.read_text()
    assert "| fte | 2 | 50.0%, 0.0% | 25.0% ± 35.4 | 50.0% | 50.0% |" in md
    assert rep.per_question.read_text().splitlines()[1:] == ["q1,correct/wrong", "q2,wrong/wrong"]


def test_metrics_json_names_and_report(tmp_path: Path) -> None:
    four_questions(tmp_path / "s")
    rep = write_report([tmp_path / "s"], tmp_path / "out")
    data = json.loads(rep.metrics.read_text())
    prof = {p["profile"]: p for p in data["profiles"]}
    # fte 3/5 correct: Wilson centre (0.6 + 0.1921)/1.7683 = 0.4480, half 1.96·sqrt(0.048 + 0.03842)/1.7683 = 0.3258
    assert prof["fte"]["accuracy_ci95"] == [pytest.approx(0.2307, abs=1e-4), pytest.approx(0.8824, abs=1e-4)]
    assert prof["shell"]["accuracy_ci95"] == [pytest.approx(0.1500, abs=1e-4), pytest.approx(0.8500, abs=1e-4)]
    [pair] = data["paired"]
    assert set(pair) == {"a", "b", "n", "a_only", "b_only", "diff", "diff_ci95", "p_value"}
    assert (pair["a"], pair["b"], pair["n"], pair["a_only"], pair["b_only"], pair["diff"], pair["p_value"]) == (
        "shell", "fte", 4, 1, 2, -0.25, 1.0)
    again = json.loads(write_report([tmp_path / "s"], tmp_path / "out2").metrics.read_text())
    assert again["paired"] == data["paired"]  # reproducible
    md = rep.markdown.read_text()
    assert "| shell | fte | 4 | 1 | 2 | -25.0 pp |" in md and "McNemar" in md and "Wilson" in md
    html = rep.html.read_text()
    assert "<h2>Per question</h2>" in html and "<td>q5</td><td></td><td>wrong</td>" in html


def test_cohen_kappa_by_hand() -> None:
    # 10 items: both yes 4, only the first yes 1, only the second yes 2, both no 3.
    # p_o = 7/10; p_first = 5/10, p_second = 6/10; p_e = .5*.6 + .5*.4 = .5; kappa = (.7 - .5) / .5 = .4
    pairs = [(True, True)] * 4 + [(True, False)] + [(False, True)] * 2 + [(False, False)] * 3
    assert cohen_kappa(pairs) == pytest.approx(0.4)
    assert cohen_kappa([]) is None
    assert cohen_kappa([(True, True)] * 3) == 1.0
    # never agree, half yes each: p_o = 0, p_e = .5 -> -1
    assert cohen_kappa([(True, False), (False, True)]) == pytest.approx(-1.0)
