"""No DynamoDB call outlives its timeout (``timeout=1`` here), on both emulators, sync
and async: callers against a silent endpoint each raise in time (none waits on
another's timeout), a reply trickled one byte every 0.25 s (which no per-read timeout
notices) is cut at the deadline, and a child forked while a parent thread is inside a
call spends at once (no lock or watchdog inherited held)."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from ledger_conformance.faults import FaultProxy, Toxic
from ledger_core.errors import LedgerError
from tests import reentry
from tests.dynamodb import tools
from tests.dynamodb.relay import relay_for
from tests.flavors import Flavored

TIMEOUT = 1.0
BOUND = TIMEOUT + 1.0  # the call's timeout, and a second of scheduling on a loaded machine
CALLERS = 8
LONG = float(tools.TIMEOUT) + 10  # the fork test's wait for a child that might hang
OPERATIONS: dict[str, Callable[[Any, str], Any]] = {
    "spend": lambda ledger, rid: ledger.spend(rid),
    "is_spent": lambda ledger, rid: ledger.is_spent(rid),
    "spend_as": lambda ledger, rid: ledger.spend_as(rid, reentry.KEYS[0]),
}


def _url(url: str, endpoint: str) -> str:
    return tools.with_query(url, endpoint_url=endpoint)


def _options(url: str) -> dict[str, str]:
    return tools.ledger_options(url, timeout=str(TIMEOUT))


@pytest.fixture
def proxied(dynamodb_url: str) -> Iterator[tuple[FaultProxy, str]]:
    endpoint = tools.url_parts(dynamodb_url)[1]["endpoint_url"]
    host, _, port = endpoint.removeprefix("http://").partition(":")
    with FaultProxy(host, int(port)) as proxy:
        listen, at = proxy.address
        yield proxy, _url(dynamodb_url, f"http://{listen}:{at}")


def _timed(call: Callable[[], Any]) -> tuple[float, Any]:
    start = time.monotonic()
    try:
        outcome = call()
    except LedgerError as exc:
        outcome = exc
    return time.monotonic() - start, outcome


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_concurrent_callers_on_a_silent_endpoint_each_raise_in_time(
    proxied: tuple[FaultProxy, str], namespace: str, operation: str
) -> None:
    proxy, url = proxied
    op = OPERATIONS[operation]
    with Flavored("sync", url, namespace=namespace, **_options(url)) as ledger:
        ledger.spend("warm")
        proxy.set(Toxic.BLACKHOLE)
        barrier = threading.Barrier(CALLERS)

        def caller(i: int) -> tuple[float, Any]:
            barrier.wait()
            return _timed(lambda: op(ledger.ledger, f"{operation}-{i}"))

        with ThreadPoolExecutor(CALLERS) as pool:
            results = list(pool.map(caller, range(CALLERS)))
    _each_raised_in_time(results)


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_concurrent_tasks_on_a_silent_endpoint_each_raise_in_time(
    proxied: tuple[FaultProxy, str], namespace: str, operation: str
) -> None:
    proxy, url = proxied
    op = OPERATIONS[operation]
    with Flavored("async", url, namespace=namespace, **_options(url)) as ledger:
        ledger.spend("warm")
        proxy.set(Toxic.BLACKHOLE)

        async def caller(i: int) -> tuple[float, Any]:
            start = time.monotonic()
            try:
                outcome = await op(ledger.ledger, f"{operation}-{i}")
            except LedgerError as exc:
                outcome = exc
            return time.monotonic() - start, outcome

        async def all_at_once() -> list[tuple[float, Any]]:
            return list(await asyncio.gather(*(caller(i) for i in range(CALLERS))))

        results = ledger.run(all_at_once())
    _each_raised_in_time(results)


def _each_raised_in_time(results: list[tuple[float, Any]]) -> None:
    slowest = max(took for took, _ in results)
    assert slowest <= BOUND, f"the slowest of {CALLERS} callers took {slowest:.1f} s"
    assert all(isinstance(outcome, LedgerError) for _, outcome in results), results


@pytest.mark.parametrize("flavor", ["sync", "async"])
def test_a_trickled_reply_is_cut_at_the_deadline(
    dynamodb_url: str, namespace: str, flavor: str
) -> None:
    endpoint = tools.url_parts(dynamodb_url)[1]["endpoint_url"]
    with relay_for(endpoint) as relay:
        url = _url(dynamodb_url, relay.endpoint())
        with Flavored(flavor, url, namespace=namespace, **_options(url)) as ledger:
            ledger.spend("warm")
            relay.trickle = 0.25  # a byte every 0.25 s: under any per-read timeout
            with ThreadPoolExecutor(1) as pool:
                pending = pool.submit(_timed, lambda: ledger.spend("slow"))
                try:
                    took, outcome = pending.result(BOUND + 5)
                except TimeoutError:
                    pytest.fail(f"spend still running {BOUND + 5} s after it started")
                finally:
                    relay.close()  # ends the trickle either way
    assert took <= BOUND, f"the trickled spend took {took:.1f} s"
    assert isinstance(outcome, LedgerError), outcome


def test_a_child_forked_while_a_parent_thread_is_in_a_call_spends(
    proxied: tuple[FaultProxy, str], namespace: str
) -> None:
    proxy, url = proxied
    # The tests' usual timeout: what is measured here is a hang, not a bound.
    with Flavored("sync", url, namespace=namespace, **tools.ledger_options(url)) as ledger:
        ledger.spend("warm")
        time.sleep(0.3)  # (before each answer was proven: a periodic check falls due)
        proxy.set(Toxic.BLACKHOLE)
        with ThreadPoolExecutor(1) as pool:
            busy = pool.submit(_timed, lambda: ledger.spend("parent"))
            time.sleep(0.2)  # the parent's thread is inside its call, waiting on the network
            healed, tell = os.pipe()
            pid = os.fork()
            if pid == 0:  # the child: its exit code says what its own spend did
                code = 1
                try:
                    os.read(healed, 1)  # the network works again: only a lock can stop it
                    code = 0 if ledger.spend("child") is True else 2
                finally:
                    os._exit(code)
            proxy.heal()
            os.write(tell, b"!")
            os.close(tell)
            os.close(healed)
            busy.result(LONG)
        deadline = time.monotonic() + LONG
        while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        if done[0] == 0:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child's spend hung")
        assert os.WEXITSTATUS(done[1]) == 0
        assert ledger.is_spent("child") is True


def test_a_resend_cut_by_the_deadline_raises_its_own_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Out of time between attempts: the last attempt's failure is raised, marked as
    retried when an earlier attempt may have landed (C5: a settle, never a refusal)."""
    import botocore.exceptions

    from ledger_dynamodb.errors import retried

    meta = {"HTTPStatusCode": 500, "RetryAttempts": 0}
    response: Any = {"Error": {"Code": "InternalServerError"}, "ResponseMetadata": meta}
    attempts: list[str] = []

    def answer(call: tools.Call) -> Any:
        attempts.append(call.op)
        raise botocore.exceptions.ClientError(response, "PutItem")

    real_sleep = time.sleep

    def overran(seconds: float) -> None:  # a pause that overran: the deadline passes in it
        real_sleep(0.25)

    monkeypatch.setattr("ledger_dynamodb.ledger.time.sleep", overran)
    ledger = tools.offline_ledger(answer, timeout=0.2)
    with pytest.raises(botocore.exceptions.ClientError) as caught:
        ledger._call(ledger._client.put_item, time.monotonic() + 0.2, {})
    assert attempts == ["put_item", "put_item"]
    assert retried(caught.value)
