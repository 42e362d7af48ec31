"""C4's local faults in URL mode (issue 12): ``decision-ledger check sqlite:///...`` and
``--ledger-url`` run them through the backend's ``local_faults`` hook, a mutant behind a
URL is caught, and a fault that cannot work here is withheld with its reason."""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

import pytest

from ledger_conformance.collect import Collector
from ledger_conformance.plugin import collector_of
from ledger_conformance.runner import run_check
from ledger_conformance.urlmode import URLFactory, local_faults
from ledger_core import registry
from ledger_core.opening import LOCAL_FAULTS, LocalFaults
from ledger_sqlite import testing
from tests.zoo.local import ENV as LOCAL_ENV
from tests.zoo.local import SwallowsFull, url_backend

SELECT = "C4_local"


class _Grab:
    collector: Collector | None = None

    @pytest.hookimpl(trylast=True)
    def pytest_configure(self, config: pytest.Config) -> None:
        self.collector = collector_of(config)


def _row(table: str, clause: str) -> str:
    found = re.search(rf"^{clause} .*$", table, re.MULTILINE)
    assert found, table
    return found.group(0)


def test_the_sqlite_backend_offers_every_fault_on_the_file_it_opens(tmp_path: Path) -> None:
    offered = local_faults(f"sqlite:///{tmp_path}/a.db?busy_timeout=2")
    assert offered is not None
    assert sorted(offered) == sorted(LOCAL_FAULTS)  # as root, on the main thread
    assert getattr(offered, "withheld", None) == {}
    assert [p.name for p in tmp_path.iterdir()] == []  # the probe left nothing
    assert local_faults("memory://x") is None  # memory has no file and no hook
    assert URLFactory(f"sqlite:///{tmp_path}/a.db", "run").ledger_local_faults is not None


def test_a_fault_that_cannot_work_here_is_withheld_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(path: Path, on: bool) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(testing, "_immutable", refused)
    seen: list[LocalFaults] = []
    worker = threading.Thread(target=lambda: seen.append(testing.file_faults(tmp_path / "a.db")))
    worker.start()
    worker.join()
    assert sorted(seen[0]) == ["locked", "removed"]
    assert "CAP_LINUX_IMMUTABLE" in seen[0].withheld["read-only"]
    assert "main thread" in seen[0].withheld["full"]
    assert [p.name for p in tmp_path.iterdir()] == []


def test_removed_never_puts_the_file_back_over_a_new_one(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    path.write_bytes(b"records")
    with pytest.raises(FileExistsError, match=r"a\.db\.removed"), testing.removed(path):
        path.write_bytes(b"a new file someone made meanwhile")
    assert path.read_bytes() == b"a new file someone made meanwhile"
    assert (tmp_path / "a.db.removed").read_bytes() == b"records"


def test_check_sqlite_url_exercises_the_local_faults(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before the hook, this row said "not exercised: the factory offers no local faults"."""
    code = run_check(url=f"sqlite:///{tmp_path}/l.db", factory=None, profile="quick", select=SELECT)
    table = capsys.readouterr().out
    assert code == 0, table
    assert _row(table, "C4").endswith(" passed"), table


def test_ledger_url_runs_every_local_fault(tmp_path: Path) -> None:
    """The pytest plugin's form: the clause's own outcome, whole, with nothing left out."""
    grab = _Grab()
    args = ["--pyargs", "ledger_conformance", "--ledger-url", f"sqlite:///{tmp_path}/l.db"]
    args += ["-k", SELECT, "-p", "no:cacheprovider", "-q", "-o", "addopts="]
    code = pytest.main([*args, "--rootdir", str(tmp_path)], plugins=[grab])
    assert grab.collector is not None
    outcomes = [o for o in grab.collector.outcomes.values() if o.name == "test_C4_local_faults"]
    assert code == pytest.ExitCode.OK
    assert [(o.outcome, o.partly) for o in outcomes] == [("passed", ())], outcomes


def test_check_says_which_faults_it_could_not_offer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No immutable flag here (not root, a filesystem without it): C4 is partly exercised,
    and the row says which fault was left out and why."""

    def refused(path: Path, on: bool) -> None:
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(testing, "_immutable", refused)
    code = run_check(url=f"sqlite:///{tmp_path}/l.db", factory=None, profile="quick", select=SELECT)
    table = capsys.readouterr().out
    assert code == 0, table
    detail = " ".join(table.split())  # the table wraps its long cells
    assert re.search(r"^C4 .* partly exercised$", table, re.MULTILINE), table
    assert "read-only not offered (cannot set the immutable flag" in detail, table
    assert "CAP_LINUX_IMMUTABLE" in detail, table


def test_check_url_catches_a_mutant_behind_a_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A SQLite ledger that turns a full disk into "already spent", opened from a URL of a
    scheme registered at run time: URL mode's faults (the backend's hook) catch it."""
    monkeypatch.setitem(registry._registered, "zoo+sqlite", url_backend(SwallowsFull))
    url = f"zoo+sqlite:///{tmp_path}/l.db"
    code = run_check(url=url, factory=None, profile="quick", select=SELECT)
    table = capsys.readouterr().out
    assert code == 1, table
    assert _row(table, "C4").endswith(" failed"), table
    assert "violation(s) of the history checker" in " ".join(table.split()), table
    assert os.path.exists(tmp_path / "l.db")  # every fault ended: the file is back


def test_a_ledger_that_stays_broken_after_a_fault_fails_c4(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before, the clause let "stays failed closed" pass: a breaker that never closes
    (every call raising once a spend failed on a full file) passed C4 local faults."""
    monkeypatch.setenv(LOCAL_ENV, str(tmp_path / "zoo.db"))
    code = run_check(
        url=None, factory="tests.zoo.mutants:stays_broken", profile="quick", select=SELECT
    )
    table = capsys.readouterr().out
    assert code == 1, table
    assert _row(table, "C4").endswith(" failed"), table
    assert "stayed broken after the full fault ended" in " ".join(table.split()), table
