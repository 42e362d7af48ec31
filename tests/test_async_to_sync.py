"""The sync flavours are what their async sources generate today (the staleness check), and
the generator keeps the sync side of each difference and nothing of the async one."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "async_to_sync.py"


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("async_to_sync", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["async_to_sync"] = module
    spec.loader.exec_module(module)
    return module


def test_every_generated_file_is_current(
    tool: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    assert tool.main(["--check"]) == 0, capsys.readouterr().err


SOURCE = '''\
"""Both flavours."""
import asyncio
import time

ASYNC = True


class AsyncThing:
    async def __aenter__(self) -> AsyncThing:
        return self

    async def run(self, client: redis.asyncio.Redis) -> None:
        if ASYNC:
            await asyncio.sleep(0)
        else:
            # a thread sleeps
            time.sleep(0)
        async with client.pipeline() as pipe:
            await pipe.aclose()
        if not ASYNC:
            print("sync only")
'''


def test_keeps_the_sync_side_and_renames(tool: ModuleType) -> None:
    renames = {**tool.RENAMES, "AsyncThing": "Thing", "redis.asyncio": "redis"}
    text = tool.drop_async(tool.keep_sync_side(SOURCE, Path("aio.py")), renames)
    assert text == textwrap.dedent('''\
        """Both flavours."""
        import asyncio
        import time



        class Thing:
            def __enter__(self) -> Thing:
                return self

            def run(self, client: redis.Redis) -> None:
                # a thread sleeps
                time.sleep(0)
                with client.pipeline() as pipe:
                    pipe.close()
                print("sync only")
        ''')


def test_refuses_an_elif_on_the_flag(tool: ModuleType) -> None:
    source = "if ASYNC:\n    a = 1\nelif b:\n    a = 2\n"
    with pytest.raises(tool.SourceError, match="elif"):
        tool.keep_sync_side(source, Path("aio.py"))


def test_a_source_must_name_another_file(tool: ModuleType) -> None:
    with pytest.raises(tool.SourceError, match="names no other file"):
        tool.directives("# async-to-sync: aio.py\n", Path("/x/aio.py"))
