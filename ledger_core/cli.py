"""``decision-ledger``: a thin shell over the library.

Exit codes (a script branches on them, so 0 and 1 are only ever answers):

- 0 success: spent by this call, is spent, a store id, setup, migration or reidentify done,
  a check passed;
- 1 an answer that was received: already spent, not spent, no store id, a failed check
  (``check``, ``doctor``), an unfinished migration (``lineage``); for ``spend-many`` /
  ``is-spent-many``, every id answered and some already spent / not spent;
- 2 usage or invalid input (a bad URL or id, a missing driver, a backend that won't load);
- 3 the store is unavailable, missing or unsafe, or the operation failed: nothing was
  proven (an ``AmbiguousSpend`` from ``spend`` means the id may be spent);
- 4 internal error, the answer is unknown: anything that is not a ``LedgerError`` (a
  third-party ledger's raw exception, a bug) or an answer that is not a bool.

Errors are one line on stderr with every secret of the URLs given removed (``--debug``
adds the traceback for exit 4). Reads, ``spend`` and a migration's source open with
``create=False``: a mistyped path is a missing store (exit 3), never a new one. A
store whose migration never finished answers nothing (exit 3); the commands that report
on a store, and the migration's target, open it anyway, to say so or to finish it.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import secrets
import shlex
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager
from types import ModuleType

from . import bulk
from .doctor import FAIL, MAX_ROUND_TRIP, diagnose, render
from .errors import (
    InvalidLedgerURL,
    InvalidRequestId,
    LedgerError,
    LedgerUnavailable,
    MissingDriver,
    missing_of,
)
from .ids import validate_request_id
from .migrate import (
    MigrationInterrupted,
    Progress,
    begin_run,
    count_ids,
    migrate,
    unfinished_runs,
)
from .notices import never_proves_line
from .preflight import before_setup
from .protocol import DecisionLedger, close_ledger, describe
from .registry import open_ledger, setup_ledger
from .reidentify import namespaces_of as _list_namespaces
from .reidentify import reidentify
from .runs import location_of, refuse_incomplete, run_state
from .urls import _secret_spans, redact_url, scrub, secret_fragments

OK, REFUSED, USAGE, UNAVAILABLE, INTERNAL = 0, 1, 2, 3, 4
INTERRUPTED = 130  # Ctrl-C, as a shell reports it


class UnknownAnswer(Exception):
    """A ledger answered something that is not a bool: the answer is unknown (exit 4)."""


def _answer(value: object, what: str) -> bool:
    if type(value) is not bool:
        raise UnknownAnswer(f"{what} answered {value!r} ({type(value).__name__}), not a bool")
    return value


@contextmanager
def _ledger(url: str, namespace: str | None, **options: bool) -> Iterator[DecisionLedger]:
    ledger = open_ledger(url, **_ns(namespace), **options)
    try:
        yield ledger
    finally:
        close_ledger(ledger)


def _opened(
    args: argparse.Namespace, *, report: bool = False
) -> AbstractContextManager[DecisionLedger]:
    """Open without creating: a missing store is ``LedgerUnavailable``, never a new one.
    ``report``: a command that reports on the store (its id, lineage, health) opens one
    whose migration is unfinished, to say so; a command that answers for ids does not."""
    return _ledger(args.url, args.namespace, create=False, allow_incomplete=report)


def _ask(args: argparse.Namespace, method: str, no: str) -> int:
    """``spend`` or ``is_spent`` of one id: 0 spent (by this call, for ``spend``), 1 ``no``."""
    validate_request_id(args.request_id)  # bad input is exit 2 before any store is opened
    with _opened(args) as ledger:
        call = getattr(ledger, method, None)
        if not callable(call):
            raise UnknownAnswer(f"{type(ledger).__name__} has no {method}")
        spent = _answer(call(args.request_id), method)
    print("spent" if spent else no)
    return OK if spent else REFUSED


def _many(args: argparse.Namespace, method: bulk.Method) -> int:
    """``spend-many`` / ``is-spent-many``: every id read and validated before the store
    is opened (a bad line is exit 2, nothing sent); one line per id on stdout, as
    ``RESULT<TAB>ID`` (the id as it was read: plain, or a JSON string with ``--json``),
    a summary on stderr. Exit 0: every id spent (by this call, for ``spend-many``); 1:
    every id answered, some already spent / not spent; else the failure's own code."""
    try:
        if args.file == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(args.file, "rb") as f:
                data = f.read()
    except OSError as exc:
        print(f"decision-ledger {args.command}: cannot read {args.file}: {exc}", file=sys.stderr)
        return USAGE
    listed = bulk.parse_ids(bulk.decode(data), json_lines=args.json)
    ids = list(dict.fromkeys(listed))  # a repeated id is answered once
    word = "spent here" if method == "spend" else "spent"
    meter = _Meter(total=len(ids), word=word) if len(ids) > bulk.BATCH else None

    def show(results: list[tuple[str, str]], tally: bulk.Tally) -> None:
        for request_id, result in results:
            shown = json.dumps(request_id, ensure_ascii=False) if args.json else request_id
            print(f"{result}\t{shown}")
        sys.stdout.flush()
        if meter is not None:
            spent = tally.counts[bulk.SPENT]
            elapsed = time.monotonic() - tally.started
            meter(Progress(len(tally.results), spent, elapsed, None, len(ids)))

    with _opened(args) as ledger:
        try:
            tally = bulk.answer_all(ledger, method, ids, show)
        finally:
            if meter is not None:
                meter.end()
    said = tally.summary(len(listed) - len(ids))
    print(f"decision-ledger {args.command}: {said}", file=sys.stderr)
    if tally.error is not None:
        raise tally.error  # said, and its exit code chosen, as for any command
    return OK if all(r == bulk.SPENT for r in tally.results.values()) else REFUSED


def _store_id(args: argparse.Namespace) -> int:
    """A store whose migration never finished refuses (``IncompleteMigration``, exit 3,
    no id printed): no host may switch to it yet (its copy was never verified). A
    catch-up run into a store already in service blocks nothing: its id, and a note."""
    with _opened(args, report=True) as ledger:
        info = describe(ledger)
        state = run_state(ledger)
        refuse_incomplete(state, location_of(ledger))
    if info.store_id is None:
        print("none")
        print(f"no store id: {info.reason}", file=sys.stderr)
        return REFUSED
    print(info.store_id)
    if state.unfinished:
        print(f"note: {state.describe()}; the store is in service", file=sys.stderr)
    return OK


def _lineage(args: argparse.Namespace) -> int:
    """The lineage markers, after every unfinished run (exit 1); a backend that cannot
    list its markers is told so, never answered with an empty chain."""
    with _opened(args, report=True) as ledger:
        unfinished = unfinished_runs(ledger)
        lister = getattr(ledger, "lineage", None)
        sources = list(lister()) if callable(lister) else None
    for line in unfinished:
        print(line)
    if sources is None:
        print(
            f"{type(ledger).__name__} cannot list its markers, so its lineage can't be "
            "shown; `decision-ledger migrate` printed it when the move finished",
            file=sys.stderr,
        )
        return REFUSED
    for source in sources:
        print(f"migrated-from {source}")
    if not sources:
        never = "no migration into it finished" if unfinished else "it was never migrated into"
        print(f"no lineage: {never}")
    return REFUSED if unfinished else OK


def _suite() -> ModuleType | None:
    """The conformance suite's commands (an optional extra, with pytest), imported by name
    only when one runs: the one place the core names it. None: not installed."""
    try:
        return importlib.import_module("ledger_conformance.commands")
    except ImportError as exc:
        print(
            f"the conformance suite is not installed ({exc}); "
            "pip install 'decision-ledger[conformance]'",
            file=sys.stderr,
        )
        return None


def _check(args: argparse.Namespace) -> int:
    if args.url is None and args.factory is None:
        print(
            "decision-ledger check: give the ledger to check: a URL "
            "(decision-ledger check sqlite:///ledger.db) or --factory module:callable",
            file=sys.stderr,
        )
        return USAGE
    if args.url is not None and args.factory is not None:
        print("decision-ledger check: give a URL or --factory, not both", file=sys.stderr)
        return USAGE
    suite = _suite()
    if suite is None:
        return USAGE
    run_check: Callable[..., int] = suite.check
    # Every option of ``check`` is the suite's, by the same name; the rest is main()'s.
    ours = ("command", "handler", "namespace", "debug")
    return run_check(**{name: v for name, v in vars(args).items() if name not in ours})


def _torture(args: argparse.Namespace) -> int:
    """The fault campaign lives in the conformance extra: imported only when asked for;
    it parses its own flags (``decision-ledger torture --help``)."""
    suite = _suite()
    if suite is None:
        return USAGE
    parsed: argparse.Namespace = suite.torture_parse(args.argv)
    args.url = parsed.url  # scrubbed from any error main() prints
    args.debug = getattr(args, "debug", False) or parsed.debug
    torture: Callable[[argparse.Namespace], int] = suite.torture
    return torture(parsed)


def _setup(args: argparse.Namespace) -> int:
    """Create the store's tables/keys where the backend needs it (idempotent)."""
    info = setup_ledger(args.url, **_ns(args.namespace))
    print(f"ready: {info.location or redact_url(args.url)} store_id={info.store_id}")
    line = never_proves_line(info)
    if line is not None:  # accepted, but hosts must know it never proves (the doctor's line)
        print(f"warning: {line}")
    return OK


class _Meter:
    """Progress on stderr: one rewritten line on a terminal, else a plain line every
    ``EVERY`` seconds (a ticker too: a slow batch still shows one); ``--all-namespaces``
    adds an overall part."""

    EVERY = 2.0  # seconds between plain lines

    def __init__(self, namespaces: int = 1, total: int | None = None, word: str = "copied") -> None:
        self.tty = sys.stderr.isatty()
        self.word = word  # what ``Progress.copied`` counts
        self.namespaces, self.grand = namespaces, total
        self.finished = self.before = 0  # namespaces done, and their ids
        self.start = self.said = time.monotonic()
        self.latest: Progress | None = None
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        if not self.tty:
            threading.Thread(target=self._tick, daemon=True).start()

    def _tick(self) -> None:
        while not self.stopped.wait(max(self.EVERY, 0.1)):
            with self.lock:
                if time.monotonic() - self.said >= self.EVERY:
                    self._say()

    def __call__(self, p: Progress) -> None:
        with self.lock:
            self.latest = p
            if self.tty or time.monotonic() - self.said >= self.EVERY:
                self._say()

    def next_namespace(self) -> None:
        with self.lock:
            self.finished += 1
            self.before += self.latest.done if self.latest else 0
            self.latest = None

    def _say(self) -> None:
        self.said = time.monotonic()
        p = self.latest
        if p is None:
            text = "starting"
        else:
            of = "" if p.total is None else f" of {p.total:,}"
            eta = "" if p.eta is None else f", ETA {p.eta:.0f} s"
            text = f"{p.done:,}{of} ids ({p.copied:,} {self.word}), {p.rate:,.0f} ids/s{eta}"
        if self.namespaces > 1:
            text += "; " + self._overall(p)
        if self.tty:
            print(f"\r{text:<79}", end="", file=sys.stderr, flush=True)
        else:
            print(text, file=sys.stderr, flush=True)

    def _overall(self, p: Progress | None) -> str:
        done = self.before + (p.done if p else 0)
        elapsed = time.monotonic() - self.start
        of = "" if self.grand is None else f" of {self.grand:,}"
        text = f"overall: {self.finished} of {self.namespaces} namespaces done, {done:,}{of} ids"
        if self.grand is not None and done and elapsed > 0:
            text += f", ETA {max(self.grand - done, 0) * elapsed / done:.0f} s"
        return text

    def end(self) -> None:
        self.stopped.set()
        with self.lock:
            if self.tty:
                print(file=sys.stderr)


def _migrate(args: argparse.Namespace) -> int:
    """The source must exist (a typo would migrate nothing from a phantom store); the
    target is created if missing: that is what a migration is for."""
    if args.all_namespaces:
        return _migrate_all(args)
    meter = _Meter()
    try:
        return _migrate_one(args, args.namespace, args.target_namespace, meter, args.resume)
    finally:
        meter.end()


@contextmanager
def _ends(
    args: argparse.Namespace, namespace: str | None, target_ns: str | None
) -> Iterator[tuple[DecisionLedger, DecisionLedger]]:
    """The source (it must exist) and the target: the migration's own, opened even
    while a run into it is unfinished."""
    with (
        _ledger(args.url, namespace, create=False) as source,
        _ledger(args.target, target_ns, allow_incomplete=True) as target,
    ):
        yield source, target


def _ns(namespace: str | None) -> dict[str, str]:
    return {"namespace": namespace} if namespace else {}


def _migrate_one(
    args: argparse.Namespace,
    namespace: str | None,
    target_ns: str | None,
    meter: _Meter,
    resume: str | None,
    total: int | None = None,
) -> int:
    with _ends(args, namespace, target_ns) as (source, target):
        try:
            total = count_ids(source) if total is None else total  # for the ETA
            report = migrate(
                source,
                target,
                merge=args.merge,
                progress=meter,
                total=total,
                resume=resume,
                target_name=_target_name(args),
            )
        except MigrationInterrupted as stopped:
            meter.end()
            marked = "every target namespace is" if args.all_namespaces else "the target is"
            text = str(stopped).replace("the target is", marked)
            _say(args, f"{text}, as printed on the next line:", [args.url, args.target])
            for line in _resume_lines(args, stopped.resume):  # each whole, to paste
                print(scrub(line, secret_fragments(args.url, args.target)), file=sys.stderr)
            return INTERRUPTED
    meter.end()
    print(
        f"copied {report.copied}, already present {report.already_present}, "
        f"verified {report.verified}; lineage {report.lineage or '(not recorded)'}"
    )
    print(f"new store id: {report.target_store_id}")
    return OK


def _namespaces(args: argparse.Namespace) -> int:
    for name in _list_namespaces(args.url, args.namespace):
        print(name)
    return OK


def _migrate_all(args: argparse.Namespace) -> int:
    """Each namespace of the source into the same one of the target, each its own run.
    Every target namespace is marked before the first id is copied, so an interruption
    anywhere leaves none of them openable; a re-run resumes each."""
    if args.namespace or args.target_namespace:
        print(
            "decision-ledger migrate: --all-namespaces moves every namespace to the same "
            "name; it takes no --namespace or --target-namespace",
            file=sys.stderr,
        )
        return USAGE
    names = _list_namespaces(args.url, None)
    resume = args.resume or secrets.token_hex(6)  # one nonce for every namespace of this run

    def mark(name: str) -> int:
        with _ends(args, name, name) as (source, target):
            begin_run(
                source, target, merge=args.merge, resume=resume, target_name=_target_name(args)
            )
            return count_ids(source)

    # Each run's note is a few hundred marker writes: the namespaces are marked side by side.
    with ThreadPoolExecutor(max_workers=4, thread_name_prefix="mark") as pool:
        totals = list(pool.map(mark, names))
    meter = _Meter(len(names), sum(totals))
    try:
        for number, (name, total) in enumerate(zip(names, totals, strict=True), 1):
            print(f"namespace {name} ({number} of {len(names)}):", file=sys.stderr, flush=True)
            code = _migrate_one(args, name, name, meter, resume, total)
            if code != OK:
                return code
            meter.next_namespace()
    finally:
        meter.end()
    print(f"migrated {len(names)} namespaces")
    return OK


def _doctor(args: argparse.Namespace) -> int:
    """Every check, pass or fail, with the fix for each failure (reads only). A store not
    set up yet: what ``setup`` would create, and the server's settings checked anyway."""
    try:
        with _opened(args, report=True) as ledger:
            checks = diagnose(ledger, max_round_trip=args.max_rtt)
    except LedgerUnavailable as exc:
        missing = missing_of(exc)
        if missing is None:
            raise
        checks = before_setup(args.url, missing, **_ns(args.namespace))
    for line in render(checks):
        print(line)
    failed = sum(check.status == FAIL for check in checks)
    print(f"{failed} check(s) failed" if failed else "every check passed")
    if any(check.raised for check in checks):
        return UNAVAILABLE
    return REFUSED if failed else OK


def _reidentify(args: argparse.Namespace) -> int:
    """A fresh genesis for one namespace or all (after a restore): each one's old and
    new store id; every instance open before now fails closed."""
    if args.all_namespaces and args.namespace:
        print(
            "decision-ledger reidentify: give --namespace or --all-namespaces, not both",
            file=sys.stderr,
        )
        return USAGE
    for done in reidentify(args.url, namespace=args.namespace, all_namespaces=args.all_namespaces):
        print(
            f"namespace {done.namespace}: old store id {done.old_store_id or 'none'}, "
            f"new store id {done.new_store_id or 'none'}"
        )
    print("every instance opened before now fails closed; hosts ask pending requests again")
    return OK


# The resume command never shows a password: it reads each from the environment.
PASSWORD_VARS = ("DECISION_LEDGER_SOURCE_PASSWORD", "DECISION_LEDGER_TARGET_PASSWORD")


def _resume_lines(args: argparse.Namespace, nonce: str | None) -> list[str]:
    """The command that resumes this migration, alone on its line (pasteable as printed),
    each password a ``${DECISION_LEDGER_..._PASSWORD}``; then, on a line of its own, the
    variables to export first."""
    words, hidden = ["decision-ledger", "migrate"], []
    for url, var in zip((args.url, args.target), PASSWORD_VARS, strict=True):
        word, names = _shell_url(url, var)
        words.append(word)
        hidden += names
    rest = _resume_options(args, nonce)
    lines = [" ".join(words + [shlex.quote(a) for a in rest])]
    if hidden:
        lines.append(
            "the passwords are hidden: first export "
            + " and ".join(f"{v}=<that password, as written in the URL>" for v in hidden)
        )
    return lines


def _shell_url(url: str, var: str) -> tuple[str, list[str]]:
    """``url`` as one shell word, each secret span a variable expanded by the shell."""
    spans = _secret_spans(url)
    if not spans:
        return shlex.quote(url), []
    names = [var if n == 0 else f"{var}_{n + 1}" for n in range(len(spans))]
    parts, last = [], 0
    for (start, end), name in zip(spans, names, strict=True):
        parts += [_double_quoted(url[last:start]), "${" + name + "}"]
        last = end
    parts.append(_double_quoted(url[last:]))
    return '"' + "".join(parts) + '"', names


def _double_quoted(text: str) -> str:
    for char in '\\"$`':
        text = text.replace(char, "\\" + char)
    return text


def _target_name(args: argparse.Namespace) -> str:
    return shlex.quote(redact_url(args.target))


def _resume_options(args: argparse.Namespace, nonce: str | None) -> list[str]:
    argv = []
    if args.namespace:
        argv += ["--namespace", args.namespace]
    if args.target_namespace:
        argv += ["--target-namespace", args.target_namespace]
    if args.merge:
        argv.append("--merge")
    if args.all_namespaces:
        argv.append("--all-namespaces")
    if nonce:
        argv += ["--resume", nonce]
    return argv


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="decision-ledger",
        description="Spend a human decision at most once, and prove when it never ran.",
    )
    parser.add_argument("--debug", action="store_true", help="show the traceback of exit 4")
    debug = argparse.ArgumentParser(add_help=False)
    debug.add_argument(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="show the traceback of exit 4 (an unexpected error) instead of one line",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def with_url(
        name: str, help_text: str, handler: Callable[[argparse.Namespace], int]
    ) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, help=help_text, parents=[debug])
        cmd.add_argument("url", help="ledger URL, e.g. sqlite:///ledger.db")
        cmd.add_argument("--namespace", help="independent ledger on the same store")
        cmd.set_defaults(handler=handler)
        return cmd

    with_url(
        "spend",
        "record an id in an existing store; exit 0 if this call spent it, 1 if already spent",
        functools.partial(_ask, method="spend", no="already spent"),
    ).add_argument("request_id")
    with_url(
        "is-spent",
        "exit 0 if the id is spent, 1 if not (never records)",
        functools.partial(_ask, method="is_spent", no="not spent"),
    ).add_argument("request_id")
    batches: tuple[tuple[str, bulk.Method, str], ...] = (
        ("spend-many", "spend", "spend many ids (0 all spent by this call, 1 some already spent)"),
        ("is-spent-many", "is_spent", "read many ids (0 all spent, 1 some not spent)"),
    )
    for name, method, text in batches:
        many = with_url(name, text, functools.partial(_many, method=method))
        many.add_argument("file", nargs="?", default="-", help="ids, one per line (- : stdin)")
        many.add_argument("--json", action="store_true", help="each line is one JSON string")
    with_url("store-id", "print the store id; exit 1 (with the reason) if there is none", _store_id)
    with_url(
        "setup", "create the ledger's tables or keys (idempotent) and print its identity", _setup
    )

    move = with_url(
        "migrate", "copy every spent id into a new store, verify, record lineage", _migrate
    )
    move.add_argument("target", help="the new store's URL")
    move.add_argument("--target-namespace", help="namespace in the new store")
    move.add_argument(
        "--merge",
        action="store_true",
        help="allow a target that already holds spends from elsewhere (merge two ledgers)",
    )
    move.add_argument(
        "--resume",
        metavar="NONCE",
        help="the run nonce of a source that never proves (printed when a run stops)",
    )
    move.add_argument(
        "--all-namespaces",
        action="store_true",
        help="migrate every namespace of the source (each to the same name in the target)",
    )
    with_url(
        "reidentify",
        "give the store a new identity after a restore from a backup (open instances fail "
        "closed, new ones report another store id)",
        _reidentify,
    ).add_argument("--all-namespaces", action="store_true", help="every namespace of the store")
    with_url("lineage", "print the stores this one was migrated from (lineage markers)", _lineage)
    with_url("namespaces", "list the namespaces of the store the URL names", _namespaces)
    doctor = with_url(
        "doctor",
        "every safety check (identity, durability, configuration, migration, round trip); "
        "exit 0 if all pass, 1 if one fails",
        _doctor,
    )
    doctor.add_argument(
        "--max-rtt",
        type=float,
        default=MAX_ROUND_TRIP,
        metavar="SECONDS",
        help=f"the slowest read that passes (default {MAX_ROUND_TRIP:g} s)",
    )

    check = sub.add_parser(
        "check", help="run the conformance suite against a ledger", parents=[debug]
    )
    check.add_argument("url", nargs="?", help="ledger URL")
    check.add_argument("--factory", help="package.module:callable building the ledger")
    for flag, text in (
        ("--restart", "shell command that restarts the store's server (C2 across a restart)"),
        ("--forget", "shell command that makes the whole store forget everything (C6; runs last)"),
        ("--failover", "shell command that fails the store over to a replica (C6; runs last)"),
        ("--restore", "shell command that snapshots, then restores, the store: told "
         "$LEDGER_RESTORE_PHASE and $LEDGER_RESTORE_NAMESPACE (C6; runs last)"),
        ("--after-restore", "shell command the store's procedure runs after a restore "
         "(decision-ledger reidentify), told $LEDGER_RESTORE_NAMESPACE"),
    ):  # fmt: skip
        check.add_argument(flag, metavar="CMD", help=text)
    check.add_argument(
        "--keep-scratch",
        action="store_true",
        help="keep the namespaces the run wrote (removed by default where the backend can)",
    )
    check.add_argument(
        "--verbose",
        action="store_true",
        help="show pytest's own output (by default it goes to a log file the last line names)",
    )
    check.add_argument(
        "--call-bound",
        type=float,
        metavar="SECONDS",
        help="the longest one call may take under a fault (C4; default 10 s): set it when "
        "the URL's timeout is longer",
    )
    check.add_argument("--report", metavar="FILE", help="write the result as JSON to FILE")
    check.add_argument("--junit", metavar="FILE", help="write the result as JUnit XML to FILE")
    profile = check.add_mutually_exclusive_group()
    profile.add_argument(
        "--quick",
        dest="profile",
        action="store_const",
        const="quick",
        help="the quick profile (the default): seconds on SQLite, minutes on an emulator",
    )
    profile.add_argument(
        "--thorough",
        dest="profile",
        action="store_const",
        const="thorough",
        help="the thorough profile: more callers, ids and examples, and C2's re-read 180 s "
        "after its first spends (so at least 3 minutes)",
    )
    check.set_defaults(handler=_check, profile="quick", namespace=None)

    torture = sub.add_parser(
        "torture",
        help="a fault campaign: concurrent spends and reads under injected faults, checked "
        "(decision-ledger torture --help)",
        add_help=False,
    )
    torture.set_defaults(handler=_torture, namespace=None)  # its flags: main() passes them
    return parser


def _exit_code(exc: LedgerError) -> int:
    if isinstance(exc, (InvalidRequestId, InvalidLedgerURL, MissingDriver)):
        return USAGE
    # Unavailable, unsafe, closed, a failed migration, a third party's own LedgerError:
    # nothing was proven. Never REFUSED: 1 is an answer, and none was received.
    return UNAVAILABLE


def _say(args: argparse.Namespace, text: str, urls: Sequence[str]) -> None:
    """One line on stderr, with every secret of the given URLs scrubbed out."""
    line = " ".join(scrub(text, secret_fragments(*urls)).split())
    print(f"decision-ledger {args.command}: {line}", file=sys.stderr)


def _urls(args: argparse.Namespace) -> list[str]:
    """The URLs given, read when an error is said (a handler may have parsed its own)."""
    return [u for u in (getattr(args, "url", None), getattr(args, "target", None)) if u]


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args, rest = parser.parse_known_args(argv)
    if args.command == "torture":
        args.argv = rest  # parsed by the campaign's own parser
    elif rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except LedgerError as exc:
        _say(args, f"{type(exc).__name__}: {exc}", _urls(args))
        return _exit_code(exc)
    except KeyboardInterrupt:
        _say(args, "interrupted", _urls(args))
        return INTERRUPTED
    except Exception as exc:
        # Not an answer, and not a failure the ledger described: it must read as neither
        # "spent" (0) nor "not spent" (1). A third-party ledger's raw exception lands here.
        urls = _urls(args)
        if getattr(args, "debug", False):
            text = "".join(traceback.format_exception(exc))
            print(scrub(text, secret_fragments(*urls)), file=sys.stderr, end="")
        _say(args, f"internal error, the answer is unknown: {type(exc).__name__}: {exc}", urls)
        return INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
