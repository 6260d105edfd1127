"""Tool calls left as text (fte_shell/model/textcalls.py) and inline thinking (fte_shell/model/completion.py):
hand-made replies, each in the shape a real server sent it."""

from __future__ import annotations

from fte_shell.model.completion import split_think
from fte_shell.model.textcalls import find_text_tool_calls

NAMES = {"bash", "search"}


def test_an_answer_that_is_wholly_a_call_object_is_a_call() -> None:
    # llama.cpp's server with a named tool_choice and Qwen2.5-Coder-1.5B (measured here)
    text = '<answer>{"name": "bash", "arguments": {"command": "search peru"}}</answer>'
    assert find_text_tool_calls(text, NAMES) == [
        {"name": "bash", "arguments": {"command": "search peru"}, "format": "answer_tag", "raw": text}]
    fenced = '<answer>```json\n{"name": "search", "arguments": {"query": "q"}}\n```</answer>'
    assert find_text_tool_calls(fenced, NAMES)[0]["arguments"] == {"query": "q"}


def test_an_answer_naming_no_tool_or_holding_more_than_a_call_is_not_a_call() -> None:
    assert find_text_tool_calls('<answer>{"name": "Peru", "arguments": {}}</answer>', NAMES) == []
    assert find_text_tool_calls('<answer>Peru. {"name": "bash", "arguments": {}}</answer>', NAMES) == []
    assert find_text_tool_calls("<answer>Peru</answer>", NAMES) == []


def test_a_bare_object_with_half_a_fence_is_a_call() -> None:
    # llama.cpp, turn 2 of a measured run: the object, then a closing fence with no opening one
    text = '{\n  "name": "search",\n  "arguments": {\n    "query": "province of San Juan",\n    "n": 1\n  }\n}\n```'
    assert find_text_tool_calls(text, NAMES) == [
        {"name": "search", "arguments": {"query": "province of San Juan", "n": 1}, "format": "json",
         "raw": text.removesuffix("```").strip()}]


def test_a_bare_object_followed_by_the_result_the_model_invented_is_a_call() -> None:
    # llama.cpp, turn 2 of a measured HotpotQA run: the call, then a <tool_response> the model made up
    call = '{\n  "name": "search",\n  "arguments": {\n    "query": "Lucy Saunders wrote many books about",\n    "n": 10\n  }\n}'
    text = call + "\n<tool_response>\nLucy Saunders wrote many books about craft beer.\n</tool_response>"
    assert find_text_tool_calls(text, NAMES) == [
        {"name": "search", "arguments": {"query": "Lucy Saunders wrote many books about", "n": 10},
         "format": "json", "raw": call}]
    # or an invented grep output in a fence (the next question of the same sweep)
    grep = '{\n  "name": "search",\n  "arguments": {\n    "query": "province"\n  }\n}'
    assert find_text_tool_calls(grep + "\n```\n1: Argentina\n2: Argentina\n```", NAMES) == [
        {"name": "search", "arguments": {"query": "province"}, "format": "json", "raw": grep}]
    # prose before the object is still not a call, nor an object naming no tool
    assert find_text_tool_calls("I will search. " + text, NAMES) == []
    assert find_text_tool_calls('{"name": "Peru", "arguments": {}}\nmore', NAMES) == []


def test_a_bare_object_followed_by_invented_fenced_calls_is_that_one_call() -> None:
    # llama.cpp, turn 2 of a measured HotpotQA run (shell profile): the call, half a fence, then the same
    # call with another argument in a fence: the call is the leading object, not the fenced one after it
    q = "English writer and journalist who wrote many books about beer and whisky"
    first = '{\n  "name": "bash",\n  "arguments": {\n    "command": "search \'%s\' -n 1"\n  }\n}' % q
    text = first + "\n```\n" + first.replace("-n 1", "-n 2") + "\n```"
    assert find_text_tool_calls(text, NAMES) == [
        {"name": "bash", "arguments": {"command": f"search '{q}' -n 1"}, "format": "json", "raw": first}]
    # a reply that opens with a fence keeps every fenced call (a model that writes two calls)
    two = "```json\n" + first + "\n```\n```json\n" + first.replace("-n 1", "-n 2") + "\n```"
    assert [c["arguments"]["command"][-4:] for c in find_text_tool_calls(two, NAMES)] == ["-n 1", "-n 2"]
    # a leading object that names no tool leaves the fenced calls after it as they were
    other = '{"name": "Peru", "arguments": {}}\n```json\n' + first + "\n```"
    assert [c["arguments"]["command"][-4:] for c in find_text_tool_calls(other, NAMES)] == ["-n 1"]


def test_split_think() -> None:
    assert split_think("<think>\nplan <answer>x</answer>\n</think>\n\n<answer>y</answer>") == (
        "plan <answer>x</answer>", "\n\n<answer>y</answer>")
    assert split_think("plan\n</think>\nreply") == ("plan", "\nreply")  # R1: the template opened it
    assert split_think("no thinking <answer>y</answer>") == (None, "no thinking <answer>y</answer>")
    assert split_think(None) == (None, "")
    assert split_think("<think>a</think><think>b</think>c") == ("a", "<think>b</think>c")
    assert split_think("a <think>b</think> c") == (None, "a <think>b</think> c")  # thinking starts a reply
