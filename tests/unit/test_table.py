"""Terminal tables: columns line up by display width, not by character count."""

from __future__ import annotations

from fitbench.results.table import colour_verdict, render_table, visible_width


def test_visible_width_counts_wide_characters_twice_and_colour_codes_not_at_all() -> None:
    assert visible_width("fits") == 4
    assert visible_width("可以运行") == 8  # four CJK characters, two columns each
    assert visible_width("显存\uff08FP32\uff09") == 12  # full-width parentheses are wide too
    assert visible_width("\x1b[32m勉强\x1b[0m") == 4


def test_chinese_cells_align_with_latin_ones() -> None:
    rows = [["显存不足", "11.75 GiB"], ["fits", "1 GiB"]]
    lines = render_table(["结论", "可用"], rows, align="lr").splitlines()
    # Every line ends at the same display column, whatever its script.
    assert len({visible_width(line) for line in lines}) == 1
    assert lines[2].startswith("显存不足  ")
    assert lines[3].startswith("fits      ")


def test_colour_verdict_colours_a_translated_label() -> None:
    assert colour_verdict("oom", enabled=True, label="显存不足") == "\x1b[31m显存不足\x1b[0m"
    assert colour_verdict("oom", enabled=False, label="显存不足") == "显存不足"
    assert colour_verdict("fits", enabled=False) == "fits"
