"""``decision-ledger``: a thin shell over the library.

Exit codes: 0 success; 1 refused (already spent, not spent, no store id) or a failed
check; 2 usage or invalid input; 3 the store is unavailable or unsafe. Errors are one
line on stderr, with passwords redacted.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from .errors import (
    InvalidLedgerURL,
    InvalidRequestId,
    LedgerClosed,
    LedgerError,
    LedgerUnavailable,
    MissingDriver,
    UnsafeStoreConfig,
)
from .migrate import migrate
from .protocol import DecisionLedger, describe
from .registry import open_ledger, setup_ledger
from .urls import redact_url

OK, REFUSED, USAGE, UNAVAILABLE = 0, 1, 2, 3


@contextmanager
def _opened(args: argparse.Namespace) -> Iterator[DecisionLedger]:
    options = {"namespace": args.namespace} if args.namespace else {}
    ledger = open_ledger(args.url, **options)
    try:
        yield ledger
    finally:
        _close(ledger)


def _close(ledger: object) -> None:
    """Close what we opened; a ledger without close() holds nothing to release."""
    close = getattr(ledger, "close", None)
    if callable(close):
        close()


def _spend(args: argparse.Namespace) -> int:
    with _opened(args) as ledger:
        spent = ledger.spend(args.request_id)
    print("spent" if spent is True else "already spent")
    return OK if spent is True else REFUSED


def _is_spent(args: argparse.Namespace) -> int:
    with _opened(args) as ledger:
        spent = ledger.is_spent(args.request_id)  # type: ignore[attr-defined]
    print("spent" if spent is True else "not spent")
    return OK if spent is True else REFUSED


def _store_id(args: argparse.Namespace) -> int:
    with _opened(args) as ledger:
        info = describe(ledger)
    if info.store_id is None:
        print("none")
        print(f"no store id: {info.reason}", file=sys.stderr)
        return REFUSED
    print(info.store_id)
    return OK


def _check(args: argparse.Namespace) -> int:
    if (args.url is None) == (args.factory is None):
        print("decision-ledger check: give a URL or --factory, not both", file=sys.stderr)
        return USAGE
    try:  # imported by name: the suite (and pytest) is an optional extra
        runner = importlib.import_module("ledger_conformance.runner")
    except ImportError as exc:
        print(
            f"the conformance suite is not installed ({exc}); "
            "pip install 'decision-ledger[conformance]'",
            file=sys.stderr,
        )
        return USAGE
    run_check: Callable[..., int] = runner.run_check
    return run_check(
        url=args.url,
        factory=args.factory,
        profile=args.profile,
        restart=args.restart,
        forget=args.forget,
    )


def _setup(args: argparse.Namespace) -> int:
    """Create the store's tables/keys where the backend needs it (idempotent)."""
    info = setup_ledger(args.url, **({"namespace": args.namespace} if args.namespace else {}))
    print(f"ready: {info.location or redact_url(args.url)} store_id={info.store_id}")
    return OK


def _migrate(args: argparse.Namespace) -> int:
    source = open_ledger(args.url, **({"namespace": args.namespace} if args.namespace else {}))
    target_options = {"namespace": args.target_namespace} if args.target_namespace else {}
    try:
        target = open_ledger(args.target, **target_options)
        try:
            report = migrate(source, target)
        finally:
            _close(target)
    finally:
        _close(source)
    print(
        f"copied {report.copied}, already present {report.already_present}, "
        f"verified {report.verified}; lineage {report.lineage or '(not recorded)'}"
    )
    print(f"new store id: {report.target_store_id}")
    return OK


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="decision-ledger",
        description="Spend a human decision at most once, and prove when it never ran.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def with_url(
        name: str, help_text: str, handler: Callable[[argparse.Namespace], int]
    ) -> argparse.ArgumentParser:
        cmd = sub.add_parser(name, help=help_text)
        cmd.add_argument("url", help="ledger URL, e.g. sqlite:///ledger.db")
        cmd.add_argument("--namespace", help="independent ledger on the same store")
        cmd.set_defaults(handler=handler)
        return cmd

    with_url(
        "spend", "record an id; exit 0 if this call spent it, 1 if already spent", _spend
    ).add_argument("request_id")
    with_url(
        "is-spent", "exit 0 if the id is spent, 1 if not (never records)", _is_spent
    ).add_argument("request_id")
    with_url("store-id", "print the store id; exit 1 (with the reason) if there is none", _store_id)
    with_url(
        "setup", "create the ledger's tables or keys (idempotent) and print its identity", _setup
    )

    move = with_url(
        "migrate", "copy every spent id into a new store, verify, record lineage", _migrate
    )
    move.add_argument("target", help="the new store's URL")
    move.add_argument("--target-namespace", help="namespace in the new store")

    check = sub.add_parser("check", help="run the conformance suite against a ledger")
    check.add_argument("url", nargs="?", help="ledger URL")
    check.add_argument("--factory", help="package.module:callable building the ledger")
    check.add_argument(
        "--restart",
        metavar="CMD",
        help="shell command that restarts the store's server (C2 across a restart)",
    )
    check.add_argument(
        "--forget",
        metavar="CMD",
        help="shell command that makes the whole store forget everything (C6; runs last)",
    )
    profile = check.add_mutually_exclusive_group()
    profile.add_argument("--quick", dest="profile", action="store_const", const="quick")
    profile.add_argument("--thorough", dest="profile", action="store_const", const="thorough")
    check.set_defaults(handler=_check, profile="quick", namespace=None)
    return parser


def _exit_code(exc: LedgerError) -> int:
    if isinstance(exc, (InvalidRequestId, InvalidLedgerURL, MissingDriver)):
        return USAGE
    if isinstance(exc, (LedgerUnavailable, UnsafeStoreConfig, LedgerClosed)):
        return UNAVAILABLE
    return REFUSED


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    try:
        return handler(args)
    except LedgerError as exc:
        print(f"decision-ledger {args.command}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return _exit_code(exc)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
