"""``docs/backends.md``'s example factory works with the suite's real store labels (they
hold ``/``, ``|``, ``.`` and spaces): the doc's code is the example file's, and the example
passes the whole suite on a SQLite file (issue 9), sync and async, with the restart,
forget and restore hooks it carries (one-namespace and whole-store forgets, in place; a
restore followed by ``reidentify``): it failed C6 when it proved its identity once at open
(issue 39)."""

from __future__ import annotations

import re
from pathlib import Path

from .runs import run_pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "backends.md"
EXAMPLE = ROOT / "examples" / "acme_backend.py"


def _doc_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL)


def test_the_docs_factory_is_the_examples_factory() -> None:
    factory = [block for block in _doc_blocks() if block.startswith("def factory(")]
    assert len(factory) == 1, "docs/backends.md shows one factory"
    assert factory[0] in EXAMPLE.read_text(), "the doc's factory drifted from the example"


def test_the_example_passes_the_suite(tmp_path: Path) -> None:
    done = run_pytest(
        "--pyargs", "ledger_conformance", "--ledger-factory", "examples.acme_backend:factory",
        "-q", "--tb=line", "-rfE",
        cwd=ROOT, env={"ACME_DB": str(tmp_path / "acme.db")}, timeout=280,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    for clause in ("C1", "C6", "C7", "C8", "C9", "C10", "H3", "L1"):  # labels: / | . spaces
        assert re.search(rf"^{clause} .*(passed|partly exercised)$", output, re.MULTILINE), (
            f"{clause} did not run:\n{output[-4000:]}"
        )
    assert "no local fault" not in output, output[-4000:]  # C4: the file's faults ran
    for clause in ("C2", "L1"):  # C2 restarted; L1 listed by both variants
        assert re.search(rf"^{clause} .* passed$", output, re.MULTILINE), output[-4000:]
    flat = " ".join(output.split())
    assert "no ledger_forget hook" not in flat, output[-4000:]
    assert "the forget hook takes no namespace" not in flat, output[-4000:]
    assert "no ledger_restore hook" not in flat, output[-4000:]  # C6 restore ran, and
    assert "restored nothing" not in flat, output[-4000:]  # the hook really restored
    assert "no after-restore step" not in flat, output[-4000:]  # and reidentify ran
    assert "no spawned interpreter" not in flat, output[-4000:]  # every caller kind ran
    assert "no call from a new interpreter" not in flat, output[-4000:]
    for flavor in ("sync", "async"):
        for scope in ("store", "namespace"):
            assert f"immediate forget ({flavor}, {scope})" in flat, output[-4000:]
