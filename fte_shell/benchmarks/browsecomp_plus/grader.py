"""Grading BrowseComp-Plus runs as its evaluation does (preset ``browsecomp-plus``, the dataset's default):
the benchmark's own ``GRADER_TEMPLATE`` (read from the clone by :mod:`.templates`) filled with the question,
the run's final response and the gold answer, and the reply read as the evaluation script reads it
(:func:`.official.parse_grader_reply`). The grader's whole reply is kept in the verdict (``raw``), so the
report's official figures re-read it exactly as the script would.

Without the clone's ``search_agent/prompts.py`` (nor ``[agent.standard] prompts_file``) the grader is
fte-shell's own wording of the same four fields, and the judge says so: not the leaderboard's grader.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from ...errors import ModelError
from ...record.sweepdir import SweepDir
from ..grading import JudgeRequest, JudgeSummary, judge_answers
from ..presets import Parsed, Preset
from .official import PRESET, parse_grader_reply
from .templates import GRADER, Templates, find_prompts_file, load_templates

SUMMARY = ("BrowseComp-Plus's own GRADER_TEMPLATE (read from the benchmark's clone), its reply read as the official "
           "evaluation reads it")


def parse_reply(text: str) -> Parsed:
    """A grader reply as the official script reads it; ModelError when it has no ``correct:`` field (the
    run is listed as an error and graded again next time, never scored from a reply it could not read)."""
    reply = parse_grader_reply(text)
    if reply.correct is None:
        raise ModelError(f"judge reply does not follow the {PRESET} grader (no 'correct: yes|no'): {text[:200]!r}")
    conf = None if reply.confidence is None else round(reply.confidence)
    return Parsed(correct=reply.correct, extracted_final_answer=reply.extracted_final_answer, confidence=conf)


def sweep_templates(sweep: Path | None) -> Templates:
    """The templates of a sweep's runs: ``[agent.standard] prompts_file`` of its configuration, else the
    dataset directory's ``search_agent/prompts.py`` (a clone of the benchmark), else fte-shell's wording."""
    manifest = SweepDir(sweep).manifest() if sweep is not None else None
    named: Any = None
    source: Path | None = None
    if manifest is not None:
        named = ((manifest.config.get("agent") or {}).get("standard") or {}).get("prompts_file")
        source = Path(manifest.dataset.source) if manifest.dataset.source else None
    return load_templates(Path(named) if named else find_prompts_file(source))


def grader_preset(templates: Templates) -> Preset:
    """The ``browsecomp-plus`` preset asking ``templates``' grader (its ``{correct_answer}`` is the preset's
    ``{gold}``)."""
    prompt = templates.texts[GRADER].replace("{correct_answer}", "{gold}")
    return Preset(PRESET, SUMMARY, prompt=prompt, parse=parse_reply)


PLACEHOLDER = grader_preset(load_templates(None))
"""The preset as the registry lists it (fte-shell's own grader wording: what grades another dataset's sweep
with ``--judge-preset browsecomp-plus``); :func:`judge_plus` asks a BrowseComp-Plus sweep's own template."""


def judge_plus(req: JudgeRequest, summary: JudgeSummary) -> None:
    """Grade a BrowseComp-Plus sweep: with its grader template under ``browsecomp-plus``, another preset as
    that preset grades (without a grading model ``fte_shell.sweep.judge`` has already chosen ``match``)."""
    if req.preset.name != PRESET:
        judge_answers(req, summary)
        return
    templates = sweep_templates(req.sweep)
    if not templates.official:
        summary.notes.append(f"{req.root}: no BrowseComp-Plus prompts.py (the clone's search_agent/prompts.py or "
                             "[agent.standard] prompts_file): graded with fte-shell's own grader wording, not the "
                             "leaderboard's")
    judge_answers(replace(req, preset=grader_preset(templates)), summary)
