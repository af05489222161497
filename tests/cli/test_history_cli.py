"""Reading commands never create a history where --db points at nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from fitbench.cli.main import main


@pytest.mark.parametrize("argv", [["history"], ["compare", "aaaa", "bbbb"], ["report", "--last", "3"]])
def test_reading_a_missing_history_is_one_line_and_creates_nothing(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "typo" / "h.sqlite"
    assert main([*argv, "--db", str(db)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no history file at" in err
    assert not db.exists() and not db.parent.exists()
