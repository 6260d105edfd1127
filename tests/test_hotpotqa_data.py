"""The HotpotQA data where the copy beside the repository is absent: downloaded from its public
distribution, sha256-checked, all or nothing. The distribution is played by a loopback server serving the
local copy (the tests never reach the internet)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from fte_shell.benchmarks.hotpotqa import (
    HOTPOTQA_FILES,
    HOTPOTQA_URL,
    HotpotQADataError,
    ensure_hotpotqa_data,
)
from tests.servers import LoopbackServer

PREFIX = "/JianGuanTHU/AMOR/pinned/data/hotpotqa"


def _serve(srv: LoopbackServer, hotpotqa_dir: Path, **replace: bytes) -> str:
    for name, (remote, _) in HOTPOTQA_FILES.items():
        body = replace.get(remote, (hotpotqa_dir / name).read_bytes())
        srv.route(f"{PREFIX}/{remote}", body=body, content_type="text/plain; charset=utf-8")
    return srv.url(PREFIX)


def test_the_pinned_checksums_are_those_of_the_data_used_here(hotpotqa_dir: Path) -> None:
    assert HOTPOTQA_URL.startswith("https://raw.githubusercontent.com/JianGuanTHU/AMOR/")
    for name, (_, sha256) in HOTPOTQA_FILES.items():
        assert hashlib.sha256((hotpotqa_dir / name).read_bytes()).hexdigest() == sha256


def test_a_download_with_good_checksums_puts_both_files_in_place_once(tmp_path: Path, hotpotqa_dir: Path) -> None:
    with LoopbackServer() as srv:
        url = _serve(srv, hotpotqa_dir)
        dest = tmp_path / "cache" / "data" / "hotpotqa-amor"
        logged: list[str] = []
        assert ensure_hotpotqa_data(dest, url=url, log=logged.append) == dest
        assert sorted(p.name for p in dest.iterdir()) == ["dev.jsonl", "test.jsonl"]
        for name in HOTPOTQA_FILES:
            assert (dest / name).read_bytes() == (hotpotqa_dir / name).read_bytes()
        assert len(logged) == 2 and srv.count() == 2
        assert ensure_hotpotqa_data(dest, url=url) == dest and srv.count() == 2  # in place: not fetched again


def test_a_bad_checksum_is_a_clear_error_and_leaves_no_file(tmp_path: Path, hotpotqa_dir: Path) -> None:
    tampered = (hotpotqa_dir / "test.jsonl").read_bytes().replace(b'"answer": "', b'"answer": "X', 1)
    with LoopbackServer() as srv:
        url = _serve(srv, hotpotqa_dir, **{"test.json": tampered})
        dest = tmp_path / "dest"
        with pytest.raises(HotpotQADataError, match=r"test\.json has sha256 [0-9a-f]{64}, not the published "
                                                    + HOTPOTQA_FILES["test.jsonl"][1]):
            ensure_hotpotqa_data(dest, url=url)
        assert list(dest.iterdir()) == []  # not even the good dev.jsonl: both or neither
        srv.route(f"{PREFIX}/dev.json", status=404, body=b"no such file", content_type="text/plain")
        with pytest.raises(HotpotQADataError, match=r"downloading .*/dev\.json failed: HTTPStatusError: .*404"):
            ensure_hotpotqa_data(dest, url=url)
        assert list(dest.iterdir()) == []


def test_the_copy_in_place_is_used_and_nothing_downloaded(hotpotqa_dir: Path) -> None:
    assert ensure_hotpotqa_data(hotpotqa_dir, url="http://127.0.0.1:9/nothing-listens-here") == hotpotqa_dir


def test_the_cli_downloads_where_the_data_is_absent(tmp_path: Path, hotpotqa_dir: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """`fte-shell corpus hotpotqa --download --no-index` (what setup-host.sh --tests runs)."""
    from typer.testing import CliRunner

    from fte_shell.benchmarks import hotpotqa
    from fte_shell.cli import app

    monkeypatch.setenv("FTE_HOTPOTQA_DIR", str(tmp_path / "data"))
    with LoopbackServer() as srv:
        monkeypatch.setattr(hotpotqa, "HOTPOTQA_URL", _serve(srv, hotpotqa_dir))
        r = CliRunner().invoke(app, ["corpus", "hotpotqa", "--download", "--no-index"])
        assert r.exit_code == 0, r.output
        assert f"HotpotQA data: {tmp_path / 'data'}" in r.output and srv.count() == 2
    assert (tmp_path / "data" / "test.jsonl").read_bytes() == (hotpotqa_dir / "test.jsonl").read_bytes()


def test_a_download_lands_where_hotpotqa_looks_last(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With no copy beside the repository (a fresh clone elsewhere) the default is the download cache."""
    from fte_shell.benchmarks import hotpotqa

    for var in ("FTE_HOTPOTQA_DIR", "FTE_SHARED_DATA"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("FTE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    cache = hotpotqa.hotpotqa_cache_dir()
    assert cache == tmp_path / "cache" / "data" / "hotpotqa-amor"
    beside_repo = Path(hotpotqa.__file__).resolve().parents[3] / "shared" / "data" / "hotpotqa-amor"
    fresh_clone = not (beside_repo / "dev.jsonl").is_file() and not (hotpotqa.SYSTEM_DATA / "dev.jsonl").is_file()
    assert hotpotqa.default_hotpotqa_dir() == (cache if fresh_clone else beside_repo if beside_repo.is_dir()
                                               else hotpotqa.SYSTEM_DATA)
