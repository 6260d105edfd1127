"""Tool schemas and descriptions: every tool of every profile is described in our TOML, bounds in the text
follow the configuration, a user file overrides descriptions per tool or per profile, and mistakes in that
file are errors naming the key. Also the system prompt's parts and date."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fte_shell.config import ModelConfig, RunConfig
from fte_shell.errors import ConfigError
from fte_shell.profiles import Profile, QuestionContext, make_profile
from fte_shell.profiles.base import ToolProfile
from fte_shell.profiles.fte import FteProfile
from fte_shell.profiles.open_find import OpenFindProfile
from fte_shell.profiles.snippet_only import SnippetOnlyProfile
from fte_shell.profiles.visit_snippet import VisitSnippetProfile
from fte_shell.profiles.visit_summary import VisitSummaryProfile
from fte_shell.prompts import ToolDescriptions, profile_addendum, read_prompt, system_prompt
from fte_shell.search import SearchResult
from fte_shell.world import RunWorld

EXPECTED_TOOLS = {
    "fte": ["search", "fetch", "grep", "read", "list_fetched"],
    "snippet-only": ["search"],
    "visit-snippet": ["search", "visit"],
    "visit-summary": ["search", "visit"],
    "open-find": ["search", "open", "scroll", "find"],
}


class ListSearch:
    """A real (in-memory) SearchBackend: returns a fixed list. Used only to make profiles offer search."""

    name = "list"

    def search(self, query: str, n: int) -> list[SearchResult]:
        return [SearchResult(rank=1, title="T", url="https://example.org/", snippet="s")][:n]


def ctx(tmp_path: Path, **agent: object) -> QuestionContext:
    cfg = RunConfig.model_validate({"agent": agent})
    cfg.agent.summary_model = ModelConfig(base_url="http://127.0.0.1:9/v1", model="reader")
    return QuestionContext(config=cfg, workspace_dir=tmp_path / "ws", world=RunWorld(ListSearch()), run_id="t")


def structured(tmp_path: Path, name: str, **agent: object) -> ToolProfile:
    p = make_profile(name, ctx(tmp_path, **agent))
    assert isinstance(p, ToolProfile)
    return p


@pytest.mark.parametrize("name", list(EXPECTED_TOOLS))
def test_every_tool_is_described_with_filled_bounds(tmp_path: Path, name: str) -> None:
    p = structured(tmp_path, name)
    try:
        assert isinstance(p, Profile) and p.name == name
        tools = p.tools()
        assert [t["function"]["name"] for t in tools] == EXPECTED_TOOLS[name]
        for t in tools:
            assert t["type"] == "function"
            fn = t["function"]
            assert len(fn["description"]) > 40
            params = fn["parameters"]
            assert params["type"] == "object" and params["additionalProperties"] is False
            for pname, prop in params["properties"].items():
                assert prop.get("description"), (name, fn["name"], pname)
                assert prop["type"] in ("string", "integer")
            text = fn["description"] + " ".join(pr["description"] for pr in params["properties"].values())
            assert not re.search(r"\{[a-z_]+\}", text), text  # every placeholder filled
    finally:
        p.close()


def test_bounds_in_descriptions_follow_the_config(tmp_path: Path) -> None:
    p = structured(tmp_path, "fte", grep_max_matches=7, grep_context=2, read_max_lines=50)
    by = {t["function"]["name"]: t["function"] for t in p.tools()}
    assert "Returns at most 7 matching lines" in by["grep"]["description"]
    assert by["grep"]["parameters"]["properties"]["context"]["description"].endswith("0 to 10 (default 2).")
    assert "Returns at most 50 lines (and at most about 50 KB)" in by["read"]["description"]
    assert by["read"]["parameters"]["required"] == ["path"]
    assert by["search"]["parameters"]["properties"]["n"]["description"] == "How many results to return (default 10, at most 50)."
    vs = structured(tmp_path, "visit-snippet", visit_snippet_chars=1234).tools()[1]["function"]
    assert "a raw excerpt of at most 1234 characters" in vs["description"]


def test_visit_is_described_per_profile(tmp_path: Path) -> None:
    snip = structured(tmp_path, "visit-snippet").tools()[1]["function"]["description"]
    summ = structured(tmp_path, "visit-summary").tools()[1]["function"]["description"]
    assert "passage" in snip and "summary" in summ and snip != summ


def test_override_file_per_tool_and_per_profile(tmp_path: Path) -> None:
    f = tmp_path / "tools.toml"
    f.write_text(
        '[grep]\ndescription = "Custom grep text, max {grep_max_matches}."\n'
        '[grep.parameters]\npattern = "Custom pattern text."\n'
        '[open-find.search]\ndescription = "Search, as open-find describes it."\n'
    )
    fte = structured(tmp_path, "fte", tool_descriptions_file=str(f))
    by = {t["function"]["name"]: t["function"] for t in fte.tools()}
    assert by["grep"]["description"] == "Custom grep text, max 20."
    assert by["grep"]["parameters"]["properties"]["pattern"]["description"] == "Custom pattern text."
    # parameters not overridden keep the packaged text
    assert by["grep"]["parameters"]["properties"]["path"]["description"].startswith("Path of one cached page")
    assert by["search"]["description"].startswith("Search the web.")
    of = structured(tmp_path, "open-find", tool_descriptions_file=str(f))
    assert of.tools()[0]["function"]["description"] == "Search, as open-find describes it."


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('[grepp]\ndescription = "x"\n', "unknown tool or profile 'grepp'"),
        ('[grep]\ndescripton = "x"\n', "unknown key 'grep.descripton'"),
        ('[grep]\ndescription = ""\n', "grep.description must be a non-empty string"),
        ('[fte.visitt]\ndescription = "x"\n', "unknown tool 'fte.visitt'"),
        ('[grep.parameters]\nregex = "x"\n', "tool 'grep' has no parameter(s) regex"),
        ("[grep\n", "is not valid TOML"),
    ],
)
def test_bad_override_file_names_the_problem(tmp_path: Path, content: str, message: str) -> None:
    f = tmp_path / "tools.toml"
    f.write_text(content)
    with pytest.raises(ConfigError, match=re.escape(message)):
        structured(tmp_path, "fte", tool_descriptions_file=str(f))


def test_missing_override_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read tool descriptions file"):
        structured(tmp_path, "fte", tool_descriptions_file=str(tmp_path / "absent.toml"))


def test_packaged_descriptions_cover_every_tool() -> None:
    d = ToolDescriptions.load()
    for profile, tools in EXPECTED_TOOLS.items():
        for tool in tools:
            assert d.describe(profile, tool).description
    assert d.describe("shell", "bash").parameters["command"]


def test_profile_classes_have_their_names() -> None:
    assert [c.name for c in (FteProfile, SnippetOnlyProfile, VisitSnippetProfile, VisitSummaryProfile, OpenFindProfile)] == [
        "fte", "snippet-only", "visit-snippet", "visit-summary", "open-find"]


# --- system prompt --------------------------------------------------------------------------------------
def test_system_prompt_parts_and_date(tmp_path: Path) -> None:
    body = read_prompt("system.md")
    add = profile_addendum("fte")
    assert add and "<answer>" in body
    assert system_prompt(add, "2026-01-02") == f"{body}\n\n{add}\n\nCurrent date: 2026-01-02"
    assert system_prompt("", "2026-01-02") == f"{body}\n\nCurrent date: 2026-01-02"
    assert re.fullmatch(r"(?s).*\n\nCurrent date: \d{4}-\d{2}-\d{2}", system_prompt(add))
    own = tmp_path / "body.md"
    own.write_text("My own body.\n")
    assert system_prompt("", "2026-01-02", own) == "My own body.\n\nCurrent date: 2026-01-02"
    with pytest.raises(ConfigError, match="YYYY-MM-DD"):
        system_prompt("", "02/01/2026")
    with pytest.raises(ConfigError, match="cannot read system prompt file"):
        system_prompt("", None, tmp_path / "absent.md")


def test_every_profile_has_an_addendum() -> None:
    for name in ("shell", *EXPECTED_TOOLS):
        assert len(profile_addendum(name)) > 50, name
    assert profile_addendum("no-such-profile") == ""
