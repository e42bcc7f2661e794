"""Shell completion scripts (bash, zsh, fish), generated from the argparse parser.

The parser is built from the one option table, so completions cannot drift
from ``--help``: each command completes its own flags, the values of flags
with choices (``-f``, ``--scope``…), and file names where a flag takes a path.
"""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass

from crawler.config import FORMAT_ALIASES
from crawler.report import FORMATS

SHELLS = ("bash", "zsh", "fish")
# Values checked after parsing (so argparse has no choices for them), completed all the same.
VALUE_HINTS = {"format": (*FORMATS, *FORMAT_ALIASES), "shell": SHELLS}
PATH_METAVARS = frozenset({"FILE", "PATH", "DIR"})


@dataclass(frozen=True, slots=True)
class Flag:
    """One option of one command, as a completion needs it."""

    strings: tuple[str, ...]
    help: str
    choices: tuple[str, ...]
    is_path: bool
    takes_value: bool


def commands(parser: argparse.ArgumentParser) -> dict[str, tuple[str, list[Flag]]]:
    """Command name -> (its one-line help, its flags)."""
    found: dict[str, tuple[str, list[Flag]]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                found[name] = (helps.get(name, ""), _flags(sub))
    return found


def _flags(parser: argparse.ArgumentParser) -> list[Flag]:
    flags = []
    for action in parser._actions:
        if not action.option_strings or action.help == argparse.SUPPRESS:
            continue  # hidden options are accepted, not offered
        metavar = action.metavar if isinstance(action.metavar, str) else ""
        flags.append(
            Flag(
                strings=tuple(action.option_strings),
                help=(action.help or "").split(" [default")[0],
                choices=tuple(str(c) for c in action.choices or VALUE_HINTS.get(action.dest, ())),
                is_path=metavar in PATH_METAVARS,
                takes_value=action.nargs != 0,
            )
        )
    return flags


def script(parser: argparse.ArgumentParser, shell: str) -> str:
    """The completion script for ``shell``."""
    if shell == "bash":
        return bash(parser)
    if shell == "zsh":
        return zsh(parser)
    return fish(parser)


def bash(parser: argparse.ArgumentParser) -> str:
    """A ``complete -F`` function for bash."""
    table = commands(parser)
    values: list[str] = []
    words: list[str] = []
    for name, (_, flags) in table.items():
        strings = " ".join(s for flag in flags for s in flag.strings)
        words.append(f"        {name}) words={shlex.quote(strings)} ;;")
        for flag in flags:
            pattern = "|".join(f"{name}:{s}" for s in flag.strings)
            if flag.choices:
                choices = shlex.quote(" ".join(flag.choices))
                values.append(
                    f'        {pattern}) COMPREPLY=($(compgen -W {choices} -- "$cur")); return ;;'
                )
            elif flag.is_path:
                values.append(f'        {pattern}) COMPREPLY=($(compgen -f -- "$cur")); return ;;')
    top = shlex.quote(" ".join([*table, "-h", "--help", "-V", "--version"]))
    return "\n".join(
        [
            '# crawler completion for bash: eval "$(crawler completion bash)"',
            "_crawler() {",
            "    local cur prev cmd words i",
            '    cur="${COMP_WORDS[COMP_CWORD]}"',
            '    prev="${COMP_WORDS[COMP_CWORD-1]}"',
            '    cmd=""',
            "    for ((i = 1; i < COMP_CWORD; i++)); do",
            '        case "${COMP_WORDS[i]}" in -*) ;; *) cmd="${COMP_WORDS[i]}"; break ;; esac',
            "    done",
            '    if [[ -z "$cmd" ]]; then',
            f'        COMPREPLY=($(compgen -W {top} -- "$cur")); return',
            "    fi",
            '    case "$cmd:$prev" in',
            *values,
            "    esac",
            '    case "$cmd" in',
            *words,
            '        *) words="" ;;',
            "    esac",
            '    if [[ "$cur" == -* ]]; then',
            '        COMPREPLY=($(compgen -W "$words" -- "$cur"))',
            '    elif [[ "$cmd" == crawl ]]; then',
            '        COMPREPLY=($(compgen -d -- "$cur"))',
            "    fi",
            "}",
            "complete -o default -F _crawler crawler",
            "",
        ]
    )


def zsh(parser: argparse.ArgumentParser) -> str:
    """zsh runs the bash function through bashcompinit."""
    return (
        '# crawler completion for zsh: eval "$(crawler completion zsh)"\n'
        "autoload -U +X compinit && compinit\n"
        "autoload -U +X bashcompinit && bashcompinit\n" + bash(parser).split("\n", 1)[1]
    )


def fish(parser: argparse.ArgumentParser) -> str:
    """``complete -c crawler`` lines for fish."""
    table = commands(parser)
    lines = [
        "# crawler completion for fish:",
        "#   crawler completion fish > ~/.config/fish/completions/crawler.fish",
        "complete -c crawler -f",
    ]
    names = " ".join(table)
    for name, (summary, _) in table.items():
        lines.append(
            f"complete -c crawler -n 'not __fish_seen_subcommand_from {names}' "
            f"-a {name} -d {_fish_quote(summary)}"
        )
    for name, (_, flags) in table.items():
        for flag in flags:
            parts = [f"complete -c crawler -n '__fish_seen_subcommand_from {name}'"]
            for string in flag.strings:
                if string.startswith("--"):
                    parts.append(f"-l {string[2:]}")
                else:
                    parts.append(f"-s {string[1:]}")
            if flag.choices:
                parts.append(f"-x -a {_fish_quote(' '.join(flag.choices))}")
            elif flag.is_path:
                parts.append("-r -F")
            elif flag.takes_value:
                parts.append("-x")
            parts.append(f"-d {_fish_quote(flag.help)}")
            lines.append(" ".join(parts))
    lines.append(
        "complete -c crawler -n '__fish_seen_subcommand_from crawl' "
        "-a '(__fish_complete_directories)'"
    )
    return "\n".join(lines) + "\n"


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
