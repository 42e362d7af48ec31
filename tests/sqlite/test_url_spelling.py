"""``sqlite:/old.db`` (one slash) is refused with the two spellings it may have meant.

Before: it opened ``old.db`` in the working directory (and ``sqlite:old.db`` the file
``ld.db``): a path that reads as absolute pointing at another file, or a missing store
reading as a new, empty one.
"""

from __future__ import annotations

import pytest

from ledger_core import InvalidLedgerURL, open_ledger
from ledger_core.cli import main


@pytest.mark.parametrize("url", ["sqlite:/old.db", "sqlite:old.db", "sqlite:/data/old.db"])
def test_too_few_slashes_are_refused_with_the_right_spelling(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    name = url.partition(":")[2].lstrip("/")
    with pytest.raises(InvalidLedgerURL) as caught:
        open_ledger(url)
    assert f"sqlite:///{name} for {name} in the working directory" in str(caught.value)
    assert f"sqlite:////{name} for /{name}" in str(caught.value)
    assert main(["is-spent", url, "a"]) == 2
    assert "three slashes" in capsys.readouterr().err
