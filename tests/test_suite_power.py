"""The suite proves its own power: it fails every mutant in the zoo, naming the clause,
and passes the correct ledgers (memory, SQLite, and the zoo's own control).

Each run is a subprocess (``python -m pytest --pyargs ledger_conformance ...``), the
way a store author runs the suite; runs go in parallel, each limited to the tests
that can catch its mutant, so the whole meta-test stays short.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from ledger_conformance.runner import PLUGINS, run_check
from tests.servers.common import binary, free_port
from tests.zoo import axes, blind_spots, mutants, opening, restoring, stateful
from tests.zoo.base import ENV
from tests.zoo.local import ENV as LOCAL_ENV

# factory path -> (clause, -k selection, profile), and -> the suite without its clause
EXPECTED = {f"tests.zoo.mutants:{k}": v for k, v in mutants.EXPECTED.items()}
EXPECTED |= {f"tests.zoo.blind_spots:{k}": v for k, v in blind_spots.EXPECTED.items()}
ONLY_CAUGHT_BY = {f"tests.zoo.mutants:{k}": v for k, v in mutants.ONLY_CAUGHT_BY.items()}
ONLY_CAUGHT_BY |= {f"tests.zoo.blind_spots:{k}": v for k, v in blind_spots.ONLY_CAUGHT_BY.items()}
EXPECTED |= {f"tests.zoo.restoring:{k}": v for k, v in restoring.EXPECTED.items()}
ONLY_CAUGHT_BY |= {f"tests.zoo.restoring:{k}": v for k, v in restoring.ONLY_CAUGHT_BY.items()}
EXPECTED |= {f"tests.zoo.axes:{k}": v for k, v in axes.EXPECTED.items()}
ONLY_CAUGHT_BY |= {f"tests.zoo.axes:{k}": v for k, v in axes.ONLY_CAUGHT_BY.items()}
EXPECTED |= {f"tests.zoo.opening:{k}": v for k, v in opening.EXPECTED.items()}
ONLY_CAUGHT_BY |= {f"tests.zoo.opening:{k}": v for k, v in opening.ONLY_CAUGHT_BY.items()}
EXPECTED |= {f"tests.zoo.stateful:{k}": v for k, v in stateful.EXPECTED.items()}
ONLY_CAUGHT_BY |= {f"tests.zoo.stateful:{k}": v for k, v in stateful.ONLY_CAUGHT_BY.items()}

# The module's fixture runs 125 suites (4 at a time) before the first test: far over the
# project's 300 s per-test timeout on a loaded machine (18 min at a load average of 25-49).
pytestmark = pytest.mark.timeout(2400)

ROOT = Path(__file__).resolve().parent.parent
# A whole-suite run of one zoo ledger takes 70 s beside two soaks on an idle-class machine
# and passed 240 s on a slower one beside CI's thorough check: a run past this bound is
# reported as timed out by the tests that read it, never by erroring the whole module.
RUN_TIMEOUT = 600.0
FAILED_LINE = re.compile(r"^FAILED \S*::(test_([A-Z]+\d+)_\S*)", re.MULTILINE)
# A run mostly waits (about 0.1-0.3 of a core: 7-12 s of CPU in a 30-60 s whole-suite run
# without one part), so four at a time need less CPU than three did before those runs
# took their smaller samples.
PARALLEL = 4
FORGETS_ON_RESTART = "volatile_server_restart"  # a redis-server without persistence


@dataclass(frozen=True)
class Run:
    code: int | None  # None: the run did not end within RUN_TIMEOUT (and was killed)
    output: str

    @property
    def failed_clauses(self) -> set[str]:
        return {m.group(2) for m in FAILED_LINE.finditer(self.output)}

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.output.splitlines()[-lines:])


def _throwaway_redis(workdir: Path) -> Iterator[str]:
    server = binary("redis-server")
    if server is None:
        pytest.skip("redis-server is not on PATH (apt-get install redis-server)")
    port = free_port()
    proc = subprocess.Popen(
        [
            server,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(workdir),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_until_listening(proc, port)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def zoo_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A throwaway redis-server on a free loopback port, for the zoo's TCP ledgers."""
    yield from _throwaway_redis(tmp_path_factory.mktemp("zoo-redis"))


@pytest.fixture
def own_redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A redis-server for one test alone (its forget hook flushes everything)."""
    yield from _throwaway_redis(tmp_path_factory.mktemp("own-redis"))


def _wait_until_listening(proc: subprocess.Popen[bytes], port: int) -> None:
    """Poll the new server with PING, bounded (200 x 0.05 s): a startup wait, not a race."""
    client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=1.0)
    try:
        for _ in range(200):
            if proc.poll() is not None:
                pytest.fail(f"redis-server exited with {proc.returncode}")
            try:
                client.ping()
                return
            except redis.ConnectionError:
                time.sleep(0.05)
        pytest.fail(f"redis-server did not listen on port {port} within 10 s")
    finally:
        client.close()


def suite_command(
    target: list[str], select: str, profile: str, redis_addr: str, sqlite_path: Path
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of one run of the suite."""
    env = {**os.environ, ENV: redis_addr, "PYTHONDONTWRITEBYTECODE": "1"}
    env[LOCAL_ENV] = str(sqlite_path)  # a file per run: one run's lock must not hit another
    env.pop("PYTEST_ADDOPTS", None)
    # Only the plugins a run needs: the environment's others (langsmith's alone imports
    # for 0.8 s) would load in each of the 125 runs.
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        *PLUGINS,
        "-p",
        "pytest_timeout",
        "--pyargs",
        "ledger_conformance",
        *target,
        "--ledger-profile",
        profile,
        "-p",
        "no:cacheprovider",
        "-q",
        "-rfEs",
        "--tb=line",
        "-o",
        "addopts=",
        "-W",
        "ignore::DeprecationWarning",
    ]
    if select:
        cmd += ["-k", select]
    return cmd, env


def _suite(target: list[str], select: str, profile: str, redis_addr: str, sqlite_path: Path) -> Run:
    cmd, env = suite_command(target, select, profile, redis_addr, sqlite_path)
    try:
        done = subprocess.run(
            cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False
        )
    except subprocess.TimeoutExpired as exc:
        said = [
            o.decode(errors="replace") if isinstance(o, bytes) else o or ""
            for o in (exc.stdout, exc.stderr)
        ]
        killed = f"killed: no verdict within {RUN_TIMEOUT:g} s: {shlex.join(cmd)}"
        return Run(None, "".join(said) + "\n" + killed)
    return Run(done.returncode, done.stdout + done.stderr)


def _long_first(item: tuple[str, tuple[list[str], str, str]]) -> tuple[bool, bool]:
    """The long runs start first, so they do not make the pool's tail: a thorough one (it
    waits at least 180 s, mostly asleep), then (nearly) the whole suite (no selection, or
    one that only leaves a clause out)."""
    _, select, profile = item[1]
    return profile != "thorough", not (select == "" or select.startswith("not "))


Jobs = dict[str, tuple[list[str], str, str]]  # name -> (target, -k selection, profile)


def suite_jobs(db: Path) -> Jobs:
    """Every mutant and every control (``db``: the SQLite control's file)."""
    jobs: Jobs = {
        name: (["--ledger-factory", name], select, profile)
        for name, (_, select, profile) in EXPECTED.items()
    }
    jobs["control:memory"] = (["--ledger-url", "memory://power"], "", "quick")
    jobs["control:sqlite"] = (["--ledger-url", f"sqlite:///{db}"], "", "quick")
    jobs["control:zoo"] = (
        ["--ledger-factory", "tests.zoo.base:correct"],
        "C4 or C5 or L1",
        "quick",
    )
    jobs["control:local"] = (["--ledger-factory", "tests.zoo.local:correct"], "C4", "quick")
    jobs["control:reentry"] = (["--ledger-factory", "tests.zoo.reentry:correct"], "C10", "quick")
    jobs["control:restore"] = (
        ["--ledger-factory", "tests.zoo.restoring:reidentified"],
        "C6_restore",
        "quick",
    )
    jobs["control:axes"] = (["--ledger-factory", "tests.zoo.axes:correct"], "axes", "quick")
    name, factory, select = opening.CONTROL
    jobs[name] = (["--ledger-factory", factory], select, "quick")
    restart = ["--ledger-restart", "tests.zoo.restartable:restart"]
    forget = ["--ledger-forget", "tests.zoo.restartable:forget"]
    jobs["control:restart"] = (
        ["--ledger-factory", "tests.zoo.restartable:persistent", *restart, *forget],
        "C2 or C6 or M1_sequences_across",
        "quick",
    )
    for control in ("renames_on_lossy_failover", "synchronous"):
        target = ["--ledger-factory", f"tests.zoo.replicated:{control}"]
        jobs[f"control:{control}"] = (target, "C6_failover", "quick")
    jobs[FORGETS_ON_RESTART] = (
        ["--ledger-factory", "tests.zoo.restartable:volatile", *restart],
        "C2_server",
        "quick",
    )
    for name, select in ONLY_CAUGHT_BY.items():
        sampled = ["--ledger-factory", name, "-p", "tests.zoo.sampled"]
        jobs[f"only:{name}"] = (sampled, select, "quick")
    return jobs


@pytest.fixture(scope="module")
def runs(zoo_redis: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """Every mutant and every control, run once, in parallel."""
    jobs = suite_jobs(tmp_path_factory.mktemp("power") / "ledger.db")
    local = tmp_path_factory.mktemp("local")
    ordered = sorted(jobs.items(), key=_long_first)
    # A thorough run sleeps through 180 s of its wait: it takes no slot of the pool.
    asleep = sum(1 for _, (_, _, profile) in ordered if profile == "thorough")
    with ThreadPoolExecutor(PARALLEL) as pool, ThreadPoolExecutor(max(1, asleep)) as sleepers:
        futures = {
            name: (sleepers if profile == "thorough" else pool).submit(
                _suite, target, select, profile, zoo_redis, local / f"{n}.db"
            )
            for n, (name, (target, select, profile)) in enumerate(ordered)
        }
        return {name: future.result() for name, future in futures.items()}


@pytest.mark.parametrize("mutant", [*sorted(EXPECTED), FORGETS_ON_RESTART])
def test_mutant_is_caught(runs: dict[str, Run], mutant: str) -> None:
    clause = EXPECTED[mutant][0] if mutant in EXPECTED else "C2"
    run = runs[mutant]
    assert run.code == 1, f"{mutant}: the suite exited {run.code}, not 1:\n{run.tail()}"
    assert clause in run.failed_clauses, (
        f"{mutant}: expected a failure of {clause}, got {sorted(run.failed_clauses)}:\n{run.tail()}"
    )


@pytest.mark.parametrize(
    "control",
    [
        "control:memory",
        "control:sqlite",
        "control:zoo",
        "control:local",
        "control:restart",
        "control:reentry",
        "control:restore",
        "control:axes",
        "control:opening",
        "control:renames_on_lossy_failover",
        "control:synchronous",
    ],
)
def test_correct_ledger_passes(runs: dict[str, Run], control: str) -> None:
    run = runs[control]
    assert run.code == 0, f"{control} failed the suite:\n{run.tail(60)}"


@pytest.mark.parametrize("mutant", sorted(ONLY_CAUGHT_BY))
def test_mutant_is_caught_only_by_its_clause(runs: dict[str, Run], mutant: str) -> None:
    """The rest of the suite passes it: without its clause, the suite would let it through."""
    run = runs[f"only:{mutant}"]
    assert run.code == 0, f"{mutant} also fails other clauses:\n{run.tail(60)}"


def test_hooks_were_exercised(runs: dict[str, Run]) -> None:
    """A control that passes only because its hooks were skipped proves nothing."""
    output = runs["control:restart"].output
    assert "not exercised: no ledger_restart hook" not in output
    assert "not exercised: no ledger_forget hook" not in output
    assert "the forget hook takes no namespace" not in output
    assert "no request could be held" not in output
    assert "not exercised: no ledger_restore hook" not in runs["control:restore"].output
    for control in ("control:renames_on_lossy_failover", "control:synchronous"):
        assert re.search(r"^C6 .* passed$", runs[control].output, re.MULTILINE), control


def _flush_command(address: str) -> str:
    host, _, port = address.rpartition(":")
    code = f"import redis; redis.Redis(host={host!r}, port={port}).flushall()"
    return f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}"


def test_check_runs_shell_hooks(
    own_redis: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`decision-ledger check --restart CMD --forget CMD`: the commands run as the hooks."""
    monkeypatch.setenv(ENV, own_redis)
    code = run_check(
        url=None,
        factory="tests.zoo.base:correct",
        profile="quick",
        restart="true",  # a restart that changes nothing: C2 must still hold
        forget=_flush_command(own_redis),
        select="C2_server or C6_forgotten",
    )
    table = capsys.readouterr().out
    assert code == 0, table
    assert re.search(r"^C6 .* passed$", table, re.MULTILINE), table
    assert re.search(r"^C2 .* passed$", table, re.MULTILINE), table
    assert "2 clause(s) passed, 0 failed, 0 not exercised" in table, table


def test_check_fails_the_clause_when_a_hook_command_fails(
    own_redis: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(ENV, own_redis)
    code = run_check(
        url=None,
        factory="tests.zoo.mutants:reads_identity_once",
        profile="quick",
        forget="echo cannot reach the store >&2; exit 7",
        select="C6_forgotten",
    )
    table = capsys.readouterr().out
    assert code == 1, table
    assert re.search(r"^C6 .* failed$", table, re.MULTILINE), table
    assert "exited with status 7" in table
    assert "cannot reach the store" in table


def test_a_pure_c1_bug_fails_c1_alone(
    zoo_redis: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Check-then-set races are reported under C1, once: the C2 and C3 tests that race
    spends too see them, and refer them to C1 instead of failing as well (issue 12)."""
    monkeypatch.setenv(ENV, zoo_redis)
    code = run_check(
        url=None,
        factory="tests.zoo.mutants:check_then_set",
        profile="quick",
        select="C1_threads or C3_reads_racing or C2_fresh or C2_every",
    )
    table = capsys.readouterr().out
    assert code == 1, table
    assert re.search(r"^C1 .* failed$", table, re.MULTILINE), table
    assert re.search(r"^C2 .* passed$", table, re.MULTILINE), table
    assert re.search(r"^C3 .* passed$", table, re.MULTILINE), table


def test_axes_control_was_exercised(runs: dict[str, Run]) -> None:
    """The generated axes' control passes with every part run: spawned interpreters,
    batches, markers and listings included (nothing left out, nothing skipped)."""
    output = runs["control:axes"].output
    assert "partly exercised" not in output, output
    assert " skipped" not in output, output


def test_reentry_control_was_exercised(runs: dict[str, Run]) -> None:
    """C10 passing on the re-entrant control means its clauses ran, faults included."""
    output = runs["control:reentry"].output
    assert re.search(r"^C10 .* passed$", output, re.MULTILINE), output  # not "partly"
    assert "the ledger has no spend_as" not in output, output


def test_a_crash_fails_the_clause_that_crashed(
    zoo_redis: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store that segfaults the interpreter (as a C extension would) in C8's tests fails
    C8, naming the signal; the clauses before and after it still run and pass."""
    monkeypatch.setenv(ENV, zoo_redis)
    code = run_check(
        url=None,
        factory="tests.zoo.blind_spots:crashes_on_nul",
        profile="quick",
        select="C7 or C8_edge or C9",
    )
    table = capsys.readouterr().out
    assert code == 1, table
    assert re.search(r"^C8 .* failed$", table, re.MULTILINE), table
    assert "killed by signal 11 (SIGSEGV)" in table, table
    assert re.search(r"^C7 .* passed$", table, re.MULTILINE), table
    assert re.search(r"^C9 .* passed$", table, re.MULTILINE), table  # ran after the crash
