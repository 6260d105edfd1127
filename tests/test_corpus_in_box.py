"""The corpus in the box (``[sandbox] corpus``): a local corpus exported once as plain files and bound
read-only at /corpus on every provider (fte_shell/sandbox/corpus_files.py)."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import pytest

from fte_shell import Sandbox
from fte_shell.errors import SandboxError
from fte_shell.sandbox import corpus_files as CF
from fte_shell.search.corpus import CorpusDoc, build_corpus

DOCS = [
    CorpusDoc(docid="101", title="Lighthouse keepers", text="The keeper of Skerryvore kept a zephyrine log.\n"),
    CorpusDoc(docid="Barack_Obama", title="Barack Obama", text="44th president."),
    CorpusDoc(docid="a/b%c", title="Slash", text="a docid with a slash and a percent sign"),
    CorpusDoc(docid=".hidden", title="Dot", text="a docid with a leading dot"),
    CorpusDoc(docid="Café", title="Café", text="zephyrine again, in a café"),
]


def make_corpus(out: Path, docs: list[CorpusDoc] = DOCS) -> Path:
    return build_corpus(docs, out)


def test_file_names_keep_plain_docids_and_percent_encode_the_rest() -> None:
    assert CF.file_name("101") == "101"
    assert CF.file_name("Barack_Obama") == "Barack_Obama"
    assert CF.file_name("a/b%c") == "a%2Fb%25c"
    assert CF.file_name(".hidden") == "%2Ehidden"
    assert CF.file_name("x.y") == "x.y"
    assert CF.file_name("Café") == "Caf%C3%A9"
    for docid in ("a/b%c", ".hidden", "Café", "..", "Ünïcødé:?*"):
        assert unquote(CF.file_name(docid)) == docid and "/" not in CF.file_name(docid)
    long = "é" * 200  # 400 bytes, 1,200 encoded: cut, then ~ and a hash
    name = CF.file_name(long)
    assert len(name.encode()) == 200 + 1 + 16 and name[200] == "~" and name.startswith("%C3%A9")
    assert CF.file_name("é" * 199 + "a") != name


def test_shard_width_keeps_directories_to_a_few_thousand_entries() -> None:
    # PER_DIR = 2,000 on average: 16 shards hold 32,000, 256 hold 512,000, 4,096 hold 8,192,000
    assert [CF.shard_width(n) for n in (1, 32_000, 32_001, 512_000, 512_001, 8_192_001)] == [1, 1, 2, 2, 3, 4]
    assert CF.doc_path("101", 2) == "16/101"  # sha256(b"101") = 16dc…
    assert CF.doc_path("101", 3) == "16/d/101" and CF.doc_path("101", 4) == "16/dc/101"  # nested past two


def test_the_export_holds_one_read_only_file_per_document(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "c")
    tree = CF.export_corpus(corpus, tmp_path / "cache")
    files = sorted(p for p in tree.rglob("*") if p.is_file())
    assert len(files) == len(DOCS)
    by_docid = {unquote(p.name): p for p in files}
    assert set(by_docid) == {d.docid for d in DOCS}
    assert by_docid["101"].read_text() == "Lighthouse keepers\nThe keeper of Skerryvore kept a zephyrine log.\n"
    assert by_docid["Barack_Obama"].read_text() == "Barack Obama\n44th president.\n"  # one final newline added
    assert by_docid["101"].relative_to(tree).as_posix() == CF.doc_path("101", 1)
    assert all(p.stat().st_mode & 0o777 == 0o444 for p in files)
    assert all(d.stat().st_mode & 0o777 == 0o555 for d in [tree, *(p.parent for p in files)])
    info = (tmp_path / "cache" / f"{tree.name}.json").read_text()
    assert '"docs": 5' in info and '"shard_width": 1' in info
    assert not [p for p in (tmp_path / "cache").iterdir() if ".tmp-" in p.name]


def test_a_deep_tree_nests_its_shards_and_is_read_only_throughout(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(CF, "PER_DIR", 1)  # 300 documents > 16**2: three hex digits, nested as ab/c
    (tmp_path / "t").mkdir()
    width, written = CF.write_tree(tmp_path / "t", ((str(i), b"x\n") for i in range(300)), 300)
    assert (width, written) == (3, 600)
    files = [p for p in (tmp_path / "t").rglob("*") if p.is_file()]
    assert len(files) == 300 and all(len(p.relative_to(tmp_path / "t").parts) == 3 for p in files)
    assert all(d.stat().st_mode & 0o777 == 0o555 for d in (tmp_path / "t").rglob("*") if d.is_dir())
    assert len(list((tmp_path / "t").iterdir())) <= 256
    CF.remove_tree(tmp_path / "t")
    assert not (tmp_path / "t").exists()


def test_one_export_per_corpus_content(tmp_path: Path) -> None:
    said: list[str] = []
    a = CF.export_corpus(make_corpus(tmp_path / "a"), tmp_path / "cache", said.append)
    assert len(said) == 1 and re.search(r"\(5 documents, ~\d+ B\)", said[0]) and str(a) in said[0]
    inode = (a / CF.doc_path("101", 1)).stat().st_ino
    again = CF.export_corpus(make_corpus(tmp_path / "same-content-elsewhere"), tmp_path / "cache", said.append)
    assert len(said) == 1  # found: nothing exported, nothing said
    assert again == a and (a / CF.doc_path("101", 1)).stat().st_ino == inode  # found, not written again
    other = CF.export_corpus(make_corpus(tmp_path / "b", DOCS[:2]), tmp_path / "cache")
    assert other != a and len([p for p in other.rglob("*") if p.is_file()]) == 2


def test_the_space_check_names_both_figures() -> None:
    CF.check_room(1_000_000, 1_050_001, Path("/c"), Path("/cache"))  # 5 % to spare: fits
    with pytest.raises(SandboxError, match=r"needs about 0\.00 GB at /cache, but only 0\.00 GB are free"
                                           r".*sandbox\.corpus_cache"):
        CF.check_room(1_000_000, 1_049_999, Path("/c"), Path("/cache"))


def test_needed_bytes_rounds_every_file_up_to_a_block(tmp_path: Path) -> None:
    corpus = make_corpus(tmp_path / "c")
    docs, needed = CF.needed_bytes(corpus)
    # five small files (each under 4 KiB) and 16 shard directories, one block each
    assert (docs, needed) == (5, 5 * 4096 + 16 * 4096)


@pytest.fixture()
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 64 KiB file system (tmpfs) for the cache: needs root (CI runs as root)."""
    if os.geteuid() != 0:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("the disk-full probe mounts a tmpfs: run the tests as root (CI does)")
        pytest.skip("mounting a small tmpfs needs root")
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def test_a_corpus_too_large_for_the_disk_is_refused_before_writing(tmp_path: Path, small_disk: Path) -> None:
    docs = [CorpusDoc(docid=f"d{i}", title=f"T{i}", text="word " * 50) for i in range(40)]  # 40 blocks + 16
    corpus = make_corpus(tmp_path / "c", docs)
    with pytest.raises(SandboxError, match=r"needs about 0\.00 GB at .*small.*free space, or set "
                                           r"sandbox\.corpus_cache"):
        CF.export_corpus(corpus, small_disk / "cache")
    assert [p.name for p in (small_disk / "cache").iterdir() if not p.name.endswith(".lock")] == []


def test_no_corpus_setting_no_mount(tmp_path: Path) -> None:
    from fte_shell.config import SandboxConfig

    assert CF.corpus_mount(SandboxConfig()) is None
    with pytest.raises(SandboxError, match="not a corpus directory"):
        CF.corpus_mount(SandboxConfig(corpus=tmp_path, corpus_cache=tmp_path / "cache"))


# --- in a box, per provider ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def corpus_box(provider_case) -> Iterator[Sandbox]:
    base = Path(tempfile.mkdtemp(prefix="fte-test-corpus-"))
    os.chmod(base, 0o755)  # a bwrap box started by root runs as sandbox.user, who must reach the corpus
    try:
        corpus = make_corpus(base / "c")
        cfg = provider_case.config(corpus=corpus, corpus_cache=base / "cache", command_timeout_s=30)
        with Sandbox(cfg) as sb:
            yield sb
    finally:
        CF.remove_tree(base)


def test_in_the_box_the_corpus_files_are_there(corpus_box: Sandbox) -> None:
    obs = corpus_box.run("find /corpus -type f | sort | sed 's|^/corpus/||'")
    assert obs.exit_code == 0
    names = sorted(line.split("/", 1)[1] for line in obs.output.split())
    assert names == sorted(CF.file_name(d.docid) for d in DOCS)
    obs = corpus_box.run(f"cat /corpus/{CF.doc_path('101', 1)}")
    assert obs.output.strip() == "Lighthouse keepers\nThe keeper of Skerryvore kept a zephyrine log."


def test_in_the_box_the_corpus_is_read_only(corpus_box: Sandbox) -> None:
    path = f"/corpus/{CF.doc_path('101', 1)}"
    obs = corpus_box.run(f"echo x >> {path}; echo rc=$?; touch /corpus/new; echo rc=$?; "
                         f"rm -f {path}; echo rc=$?; mkdir /corpus/d; echo rc=$?; "
                         "grep -c ' /corpus ' /proc/mounts; grep ' /corpus ' /proc/mounts | grep -c '[ ,]ro[ ,]'")
    lines = obs.output.splitlines()
    assert [ln for ln in lines if ln.startswith("rc=")] == ["rc=1"] * 4, obs.output
    assert lines[-2:] == ["1", "1"], obs.output  # one mount at /corpus, and it is read-only
    assert corpus_box.run(f"cat {path}").output.strip().endswith("zephyrine log.")


def test_in_the_box_the_corpus_is_greppable(corpus_box: Sandbox) -> None:
    obs = corpus_box.run("rg -l zephyrine /corpus | xargs -n1 basename | sort")
    assert obs.exit_code == 0 and obs.output.split() == sorted(["101", CF.file_name("Café")])
    obs = corpus_box.run("grep -rl Skerryvore /corpus | wc -l; grep -rhi 'president' /corpus")
    assert obs.output.split("\n")[:2] == ["1", "44th president."]


@pytest.mark.docker
def test_the_shell_profile_greps_the_corpus_without_search_and_is_told_where_it_is(
        docker_ready: None, tmp_path: Path) -> None:
    from fte_shell.config import RunConfig
    from fte_shell.profiles import QuestionContext, make_profile
    from fte_shell.world import RunWorld

    corpus = make_corpus(tmp_path / "c")
    plain = RunConfig.model_validate({"search": {"backend": "none"}})
    with_corpus = RunConfig.model_validate({"search": {"backend": "none"}, "sandbox": {
        "corpus": str(corpus), "corpus_cache": str(tmp_path / "cache")}})
    shell = make_profile("shell", QuestionContext(with_corpus, tmp_path / "ws", RunWorld(None), "test-corpus-shell"))
    try:
        addendum = shell.system_addendum()
        assert "/corpus" in addendum and "No search backend is configured" in addendum
        out = shell.execute("bash", {"command": "rg -l zephyrine /corpus | wc -l"})
        assert out.output.splitlines()[0] == "2" and out.meta["exit_code"] == 0
    finally:
        shell.close()
    other = make_profile("shell", QuestionContext(plain, tmp_path / "ws2", RunWorld(None), "test-no-corpus-shell"))
    try:
        assert "/corpus" not in other.system_addendum()
        assert other.execute("bash", {"command": "ls /corpus"}).meta["exit_code"] != 0
    finally:
        other.close()


def test_the_perf_script_runs(tmp_path: Path) -> None:
    """perf/corpus_in_box.py on a tiny corpus and one provider, so the script that makes the figures cannot
    rot (its figures are in docs/sandbox.md; no speed is asserted here)."""
    import sys

    from fte_shell.sandbox import get_provider

    why = get_provider("bwrap").probe(30.0)
    if why:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"bwrap is not usable: {why}")
        pytest.skip(f"bwrap is not usable: {why}")
    import json

    repo = Path(__file__).resolve().parent.parent
    jsonl = tmp_path / "docs.jsonl"
    words = ["alpha", "bravo", "charlie", "deltaforceful", "echo", "foxtrotting", "golf"]
    jsonl.write_text("".join(json.dumps({"id": f"doc{i}", "contents": " ".join(words[i % 7:] + words[:i % 7])}) + "\n"
                             for i in range(300)))
    out = subprocess.run([sys.executable, str(repo / "perf" / "corpus_in_box.py"), "--from-jsonl", str(jsonl),
                          "--repeats", "1", "--starts", "1", "--providers", "bwrap"], capture_output=True, text=True,
                         timeout=600, check=True).stdout
    assert "tree: 300 documents" in out
    rows = [ln.split() for ln in out.splitlines() if ln.startswith("bwrap ")]
    assert len(rows) == 4  # three patterns, one start row
    assert all(float(r[-1]) > 0 for r in rows[:3])  # box/host ratios were computed


def test_a_sweep_exports_the_corpus_before_its_threads(tmp_path: Path) -> None:
    from fte_shell.config import RunConfig
    from fte_shell.sandbox import get_provider
    from fte_shell.sweep.run import _prepare_sandbox

    why = get_provider("bwrap").probe(30.0)
    if why:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"bwrap is not usable: {why}")
        pytest.skip(f"bwrap is not usable: {why}")
    corpus = make_corpus(tmp_path / "c")
    cfg = RunConfig.model_validate({"sandbox": {"provider": "bwrap", "corpus": str(corpus),
                                                "corpus_cache": str(tmp_path / "cache")}})
    said: list[str] = []
    _prepare_sandbox(cfg, said.append)
    assert [m for m in said if m.startswith("exporting the corpus")], said
    assert CF.corpus_mount(cfg.sandbox) is not None and len(list((tmp_path / "cache").glob("*.json"))) == 1
