"""Installing and learning it: --help, completions, the man page, make crawl, the extras."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from crawler.cli import completion, manpage, options
from crawler.cli.parser import build_parser

from kit.clikit import clean_env, run_cli

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = Path(__file__).parent / "fixtures" / "built-site"


def help_of(command: str) -> str:
    return run_cli(command, "--help", cwd=ROOT).stdout


def test_help_has_a_description_examples_formats_and_groups() -> None:
    top = run_cli("--help", cwd=ROOT).stdout
    assert "Recursive website link checker" in top
    assert "examples:" in top
    assert "exit codes:" in top
    crawl = help_of("crawl")
    for title, _, _ in options.GROUPS:
        assert f"\n{title}:\n" in crawl, title
    assert "examples:" in crawl
    assert "text, json, jsonl, markdown, csv, junit, sarif, html" in crawl


def test_report_shows_only_what_a_report_uses() -> None:
    report = help_of("report")
    for flag in ("--db", "-f", "--output", "--log-level", "--crawl"):
        assert flag in report
    for flag in ("--workers", "--durability", "--parse-helpers", "--no-progress", "--timeout"):
        assert flag not in report, flag
    # still accepted, as before: scripts pass -n to every command
    args = build_parser().parse_args(["report", "-n", "--workers", "2"])
    assert (args.no_progress, args.workers) == (True, 2)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["report", "--timeout", "5"])  # a crawl setting, as before


def test_every_option_is_in_exactly_one_group() -> None:
    grouped = [name for _, _, fields in options.GROUPS for name in fields]
    assert sorted(grouped) == sorted(options.BY_FIELD)


def bash_complete(script: str, *words: str) -> list[str]:
    line = " ".join(f"'{w}'" for w in words)
    program = (
        f"{script}\nCOMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; _crawler; "
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    result = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", program],
        capture_output=True,
        text=True,
        check=True,
        cwd=FIXTURE,
    )
    return result.stdout.split()


def test_bash_completes_commands_flags_choices_and_paths() -> None:
    script = run_cli("completion", "bash", cwd=ROOT).stdout
    assert bash_complete(script, "crawler", "cr") == ["crawl"]
    assert "--timeout" in bash_complete(script, "crawler", "crawl", "--tim")
    assert "--workers" not in bash_complete(script, "crawler", "report", "--w")
    assert bash_complete(script, "crawler", "crawl", "-f", "ja") == []
    assert bash_complete(script, "crawler", "crawl", "-f", "j") == ["json", "jsonl", "junit"]
    assert bash_complete(script, "crawler", "report", "--db", "ind") == ["index.html"]
    assert bash_complete(script, "crawler", "crawl", "do") == ["docs"]


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_scripts_name_every_flag(shell: str) -> None:
    script = completion.script(build_parser(), shell)
    for option in options.OPTIONS:
        for flag in option.flags:
            needle = (
                flag
                if shell == "zsh"
                else (f"-l {flag[2:]}" if flag.startswith("--") else f"-s {flag[1:]}")
            )
            assert needle in script, (shell, flag)
    binary = shutil.which(shell)
    if binary is not None:  # a syntax check where the shell is installed
        subprocess.run([binary, "-n", "-c", script], check=True)


def test_the_man_page_is_generated_and_renders() -> None:
    page = manpage.render(build_parser())
    assert (ROOT / "docs" / "crawler.1").read_text(encoding="utf-8") == page, "run make man"
    for option in options.OPTIONS:
        assert options.BY_FIELD[option.field].flags[-1].replace("-", "\\-") in page
    groff = shutil.which("groff")
    if groff is None:
        pytest.skip("groff is not installed")
    result = subprocess.run(
        [groff, "-man", "-Tutf8", "-ww", "-z"],
        input=page,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0
    assert result.stderr == ""


def test_make_crawl_explains_broken_links_without_makes_error_line(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text('<a href="/gone.html">gone</a>')
    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not installed")
    result = subprocess.run(
        [make, "-s", "crawl", f"URL={site}", f"ARGS=--db {tmp_path / 'c.db'} -n"],
        cwd=ROOT,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "broken links found" in result.stderr
    assert "Error 2" not in result.stderr  # make's "*** [Makefile:…: crawl] Error 2" line
    assert "gone.html" in result.stdout


BLOCK_EXTRAS = """
import sys
sys.modules["asyncpg"] = None
sys.modules["prometheus_client"] = None
from crawler.cli import main
sys.exit(main.main(sys.argv[1:]))
"""


def run_without_extras(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCK_EXTRAS, *args],
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_base_install_needs_neither_asyncpg_nor_prometheus(tmp_path: Path) -> None:
    shutil.copytree(FIXTURE, tmp_path / "public")
    args = (
        "crawl",
        "public",
        "--base-url",
        "https://example.org/",
        "--fallback-extensions",
        "html",
    )
    result = run_without_extras(*args, "-n", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    pg = run_without_extras("report", "--db", "postgresql://127.0.0.1:1/none", cwd=tmp_path)
    assert pg.returncode == 3, pg.stderr
    assert "pip install 'crawler-linkcheck[postgres]'" in pg.stderr
    serve = run_without_extras(
        "serve", "--port", "0", "--data-dir", str(tmp_path / "d"), cwd=tmp_path
    )
    assert serve.returncode == 3, serve.stderr
    assert "pip install 'crawler-linkcheck[service]'" in serve.stderr
