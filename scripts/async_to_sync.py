"""Write each backend's sync flavour from its async source, so the two cannot drift (C9).

psycopg's ``tools/async_to_sync.py`` and PyMongo's ``tools/synchro.py`` are the model: one
async source, the sync flavour generated and committed beside it, and a check (a test, so
CI) that the committed file is what the source generates today. A reader reads plain code
in either file; a change is made once, in the async source.

A source names its target and its renames in its first lines::

    # async-to-sync: ledger.py
    # async-to-sync rename: AsyncRedisLedger=RedisLedger redis.asyncio=redis

Then, token by token (comments and layout kept): ``async`` and ``await`` go; the renames
apply to names and dotted chains (``RENAMES`` holds the ones every source shares); where
the flavours really differ, an ``if ASYNC:`` / ``else:`` block keeps only its ``else`` side
in the sync file (``if not ASYNC:`` the reverse), and the source's ``ASYNC = True`` line
goes. ``ruff`` then drops the imports the sync side no longer uses and formats the file.

Usage: ``python scripts/async_to_sync.py`` writes every target; ``--check`` writes nothing
and exits 1 naming each stale one.
"""

from __future__ import annotations

import argparse
import ast
import io
import itertools
import subprocess
import sys
import tokenize
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROOTS = ("backends", "ledger_core")
DIRECTIVE = "# async-to-sync:"
RENAME = "# async-to-sync rename:"
HEADER = "# Generated from {source} by scripts/async_to_sync.py: edit that file, not this.\n"
RENAMES = {
    "__aenter__": "__enter__",
    "__aexit__": "__exit__",
    "__aiter__": "__iter__",
    "__anext__": "__next__",
    "StopAsyncIteration": "StopIteration",
    "AsyncIterator": "Iterator",
    "AsyncIterable": "Iterable",
    "AsyncGenerator": "Generator",
    "aclose": "close",
    "asynccontextmanager": "contextmanager",
    "AsyncExitStack": "ExitStack",
    "anext": "next",
    "aiter": "iter",
}


class SourceError(Exception):
    """A source the tool cannot translate faithfully: fix the source, never guess."""


def sources() -> list[Path]:
    """Every file under the roots whose first lines carry the directive."""
    found = []
    for root in ROOTS:
        for path in sorted((REPO / root).rglob("*.py")):
            with path.open(encoding="utf-8") as f:
                head = [f.readline() for _ in range(5)]
            if any(line.startswith(DIRECTIVE) for line in head):
                found.append(path)
    return found


def directives(text: str, path: Path) -> tuple[Path, dict[str, str]]:
    target: Path | None = None
    renames = dict(RENAMES)
    for line in text.splitlines()[:5]:
        if line.startswith(RENAME):
            for pair in line[len(RENAME) :].split():
                old, sep, new = pair.partition("=")
                if not sep or not old or not new:
                    raise SourceError(f"{path}: rename {pair!r} is not OLD=NEW")
                renames[old] = new
        elif line.startswith(DIRECTIVE):
            target = path.with_name(line[len(DIRECTIVE) :].strip())
    if target is None or target == path:
        raise SourceError(f"{path}: the directive names no other file")
    return target, renames


def _is_async_flag(test: ast.expr) -> bool | None:
    """``True`` for ``ASYNC``, ``False`` for ``not ASYNC``, ``None`` for anything else."""
    if isinstance(test, ast.Name) and test.id == "ASYNC":
        return True
    if (
        isinstance(test, ast.UnaryOp)
        and isinstance(test.op, ast.Not)
        and isinstance(test.operand, ast.Name)
        and test.operand.id == "ASYNC"
    ):
        return False
    return None


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def keep_sync_side(text: str, path: Path) -> str:
    """Each ``if ASYNC:`` block replaced by its sync side, dedented to the ``if``."""
    lines = text.splitlines(keepends=True)
    edits: list[tuple[int, int, list[str]]] = []  # 0-based [start, end) -> new lines
    for node in ast.walk(ast.parse(text, str(path))):
        if isinstance(node, ast.Assign) and _assigns_async_flag(node):
            edits.append((node.lineno - 1, node.end_lineno or node.lineno, []))
        if not isinstance(node, ast.If) or (flag := _is_async_flag(node.test)) is None:
            continue
        if node.orelse and isinstance(node.orelse[0], ast.If) and _elif(lines, node.orelse[0]):
            raise SourceError(f"{path}:{node.lineno}: no elif on ASYNC: nest an if instead")
        kept = node.orelse if flag else node.body
        start, end = node.lineno - 1, node.end_lineno or node.lineno
        if not kept:
            edits.append((start, end, []))
            continue
        first, last = kept[0].lineno - 1, kept[-1].end_lineno or kept[-1].lineno
        first = _with_leading_comments(lines, first, _indent(lines[first]))
        shift = _indent(lines[first]) - _indent(lines[start])
        edits.append((start, end, [_dedent(line, shift) for line in lines[first:last]]))
    edits.sort(key=lambda edit: edit[0])
    for before, after in itertools.pairwise(edits):
        if after[0] < before[1]:
            raise SourceError(f"{path}:{after[0] + 1}: an ASYNC block inside another one")
    for start, end, new in reversed(edits):
        lines[start:end] = new
    return "".join(lines)


def _assigns_async_flag(node: ast.Assign) -> bool:
    return (
        len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id == "ASYNC"
    )


def _elif(lines: list[str], node: ast.If) -> bool:
    return lines[node.lineno - 1].lstrip().startswith("elif")


def _with_leading_comments(lines: list[str], first: int, indent: int) -> int:
    """Comment lines just above a branch's first statement belong to that branch."""
    while first > 0 and lines[first - 1].strip().startswith("#"):
        if _indent(lines[first - 1]) != indent:
            break
        first -= 1
    return first


def _dedent(line: str, shift: int) -> str:
    if not line.strip():
        return line
    if _indent(line) < shift:
        raise SourceError(f"a line less indented than its block: {line!r}")
    return line[shift:]


def drop_async(text: str, renames: dict[str, str]) -> str:
    """``async``/``await`` removed and names renamed, by token position."""
    tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    edits: list[tuple[tuple[int, int], tuple[int, int], str]] = []
    dotted = {key: key.split(".") for key in renames if "." in key}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.type == tokenize.NAME and tok.string in ("async", "await"):
            nxt = tokens[i + 1]
            end = nxt.start if nxt.start[0] == tok.end[0] else tok.end
            edits.append((tok.start, end, ""))
        elif tok.type == tokenize.NAME and not _is_attribute(tokens, i):
            for key, parts in dotted.items():
                if _matches(tokens, i, parts):
                    edits.append((tok.start, tokens[i + 2 * len(parts) - 2].end, renames[key]))
                    i += 2 * len(parts) - 2
                    break
            else:
                if tok.string in renames:
                    edits.append((tok.start, tok.end, renames[tok.string]))
        elif tok.type == tokenize.NAME and tok.string in renames and "." not in tok.string:
            edits.append((tok.start, tok.end, renames[tok.string]))  # obj.aclose()
        i += 1
    lines = text.splitlines(keepends=True)
    for (row, col), (end_row, end_col), new in reversed(edits):
        if row != end_row:
            raise SourceError(f"line {row}: a rename across lines")
        line = lines[row - 1]
        lines[row - 1] = line[:col] + new + line[end_col:]
    return "".join(lines)


def _is_attribute(tokens: list[tokenize.TokenInfo], i: int) -> bool:
    return i > 0 and tokens[i - 1].type == tokenize.OP and tokens[i - 1].string == "."


def _matches(tokens: list[tokenize.TokenInfo], i: int, parts: list[str]) -> bool:
    for k, part in enumerate(parts):
        at = i + 2 * k
        if at >= len(tokens) or tokens[at].string != part:
            return False
        if k and tokens[at - 1].string != ".":
            return False
    return True


def formatted(text: str, target: Path) -> str:
    """Unused imports dropped, imports sorted, the project's format, as CI checks it."""
    name = str(target.relative_to(REPO))
    ruff = [sys.executable, "-m", "ruff"]
    for args in (
        ["check", "--fix", "--select", "F401,I", "--quiet", "--exit-zero"],
        ["format", "--quiet"],
    ):
        text = subprocess.run(
            [*ruff, *args, "--stdin-filename", name, "-"],
            input=text,
            capture_output=True,
            text=True,
            check=True,
            cwd=REPO,
        ).stdout
    return text


def generate(source: Path) -> tuple[Path, str]:
    text = source.read_text(encoding="utf-8")
    target, renames = directives(text, source)
    body = "".join(
        line for line in text.splitlines(keepends=True) if not line.startswith((DIRECTIVE, RENAME))
    )
    body = drop_async(keep_sync_side(body, source), renames)
    header = HEADER.format(source=source.name)
    return target, formatted(header + body, target)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--check", action="store_true", help="write nothing; exit 1 naming each stale target"
    )
    args = parser.parse_args(argv)
    stale = []
    for source in sources():
        target, text = generate(source)
        current = target.read_text(encoding="utf-8") if target.exists() else None
        if current == text:
            continue
        name = target.relative_to(REPO)
        if args.check:
            stale.append(f"{name} is stale: run python scripts/async_to_sync.py")
        else:
            target.write_text(text, encoding="utf-8")
            print(f"wrote {name}")
    for line in stale:
        print(line, file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["HEADER", "RENAMES", "SourceError", "generate", "main", "sources"]
