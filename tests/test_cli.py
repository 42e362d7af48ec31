"""The CLI's exit codes and one-line errors (0 ok, 1 refused, 2 usage, 3 unavailable)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ledger_core.cli import main

SECRET = "hunter2-secret"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out.strip(), err.strip()


def test_spend_then_refuse(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path}/l.db"
    assert run(capsys, "setup", url)[0] == 0
    assert run(capsys, "is-spent", url, "req") == (1, "not spent", "")
    assert run(capsys, "spend", url, "req") == (0, "spent", "")
    assert run(capsys, "spend", url, "req") == (1, "already spent", "")
    assert run(capsys, "is-spent", url, "req") == (0, "spent", "")
    assert run(capsys, "spend", url, "--namespace", "other", "req")[0] == 3  # no genesis yet
    assert run(capsys, "setup", url, "--namespace", "other")[0] == 0
    assert run(capsys, "spend", url, "--namespace", "other", "req") == (0, "spent", "")


def test_store_id(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "setup", f"sqlite:///{tmp_path}/l.db")[0] == 0
    code, out, _ = run(capsys, "store-id", f"sqlite:///{tmp_path}/l.db")
    assert code == 0
    assert out.startswith("sqlite:")
    code, out, err = run(capsys, "store-id", "memory://")
    assert (code, out) == (1, "none")
    assert "forgotten on restart" in err


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (("spend", "sqlite:///{tmp}/l.db", ""), 2, "InvalidRequestId: request id is empty"),
        (("spend", "nosuch://x", "a"), 2, "UnknownScheme"),
        (("spend", f"sqlite://u:{SECRET}@host/x.db", "a"), 2, "no host"),
        (("spend", "sqlite:///{tmp}/missing/l.db", "a"), 3, "LedgerUnavailable"),
        (("store-id", "sqlite:///{tmp}/l.db?x=1"), 2, "unknown option"),
    ],
)
def test_errors_are_one_line(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: tuple[str, ...],
    code: int,
    message: str,
) -> None:
    got, out, err = run(capsys, *(a.replace("{tmp}", str(tmp_path)) for a in argv))
    assert got == code
    assert message in err
    assert len(err.splitlines()) == 1
    assert SECRET not in err + out


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["spend"])
    assert exited.value.code == 2


def test_installed_entry_point_runs(tmp_path: Path) -> None:
    assert main(["setup", f"sqlite:///{tmp_path}/l.db"]) == 0
    done = subprocess.run(
        [sys.executable, "-m", "ledger_core.cli", "spend", f"sqlite:///{tmp_path}/l.db", "x"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stdout.strip()) == (0, "spent")


def test_check_passes_its_hook_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    import ledger_conformance.runner as runner

    seen: dict[str, object] = {}

    def fake_run_check(**kwargs: object) -> int:
        seen.update(kwargs)
        return 0

    monkeypatch.setattr(runner, "run_check", fake_run_check)
    argv = ["check", "redis://h/0", "--restart", "systemctl restart redis", "--forget", "flush"]
    assert main([*argv, "--failover", "promote"]) == 0
    assert seen["restart"] == "systemctl restart redis"
    assert seen["forget"] == "flush"
    assert seen["failover"] == "promote"
    assert main(["check", "redis://h/0"]) == 0
    assert seen["restart"] is None
    assert seen["forget"] is None
    assert seen["failover"] is None
    assert seen["keep_scratch"] is False
    assert main(["check", "redis://h/0", "--keep-scratch"]) == 0
    assert seen["keep_scratch"] is True
    assert seen["call_bound"] is None
    assert main(["check", "redis://h/0?timeout=30", "--call-bound", "62"]) == 0
    assert seen["call_bound"] == 62.0
    assert main(["check", "redis://h/0", "--restore", "r.sh", "--after-restore", "a.sh"]) == 0
    assert (seen["restore"], seen["after_restore"]) == ("r.sh", "a.sh")
