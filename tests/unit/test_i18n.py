"""The message catalogue: every sentence in English and Chinese, with the same placeholders."""

from __future__ import annotations

import re
import string

import pytest

from fitbench.advise.i18n import (
    LANGS,
    MESSAGES,
    format_params,
    part_label,
    resolve_lang,
    status_label,
    t,
    verdict_label,
)
from fitbench.errors import FitbenchError
from fitbench.estimate.breakdown import PART_NAMES

CJK = re.compile(r"[\u4e00-\u9fff]")


def _fields(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}


@pytest.mark.parametrize("key", sorted(MESSAGES))
def test_every_key_has_both_languages_with_the_same_placeholders(key):
    entry = MESSAGES[key]
    assert set(entry) == set(LANGS), key
    assert all(isinstance(v, str) and v.strip() for v in entry.values()), key
    assert _fields(entry["en"]) == _fields(entry["zh"]), key
    # Every message formats with its placeholders filled.
    params = {name: "X" for name in _fields(entry["en"])}
    for lang in LANGS:
        assert "{" not in t(key, lang, **params).replace("{{", "")


def test_chinese_is_chinese_not_a_copy_of_the_english():
    same = [k for k, v in MESSAGES.items() if v["zh"] == v["en"]]
    # Only templates made of placeholders and units may be identical.
    for key in same:
        assert not re.search(
            r"[A-Za-z]{4,}",
            string.Formatter().vformat(
                MESSAGES[key]["en"], (), {n: "" for n in _fields(MESSAGES[key]["en"])}
            ),
        ), key
    sentences = [k for k in MESSAGES if len(MESSAGES[k]["en"]) > 30]
    assert all(CJK.search(MESSAGES[k]["zh"]) for k in sentences)


def test_verdicts_in_the_words_the_brief_readers_use():
    assert [verdict_label(v, "zh") for v in ("fits", "tight", "oom")] == ["可以运行", "勉强", "显存不足"]
    assert [verdict_label(v, "en") for v in ("fits", "tight", "oom")] == ["fits", "tight", "out of memory"]
    assert status_label("timeout", "zh") == "超时"
    assert verdict_label("unknown-verdict", "zh") == "unknown-verdict"


def test_every_memory_part_has_a_label():
    for part in PART_NAMES:
        assert f"part.{part}" in MESSAGES
        assert CJK.search(part_label(part, "zh")) or part_label(part, "zh").startswith(("KV", "CUDA", "FP32"))


@pytest.mark.parametrize(
    ("arg", "environ", "expected"),
    [
        (None, {"LANG": "zh_CN.UTF-8"}, "zh"),
        (None, {"LANG": "en_US.UTF-8"}, "en"),
        (None, {"LANG": "C.UTF-8"}, "en"),
        (None, {}, "en"),
        (None, {"LC_ALL": "zh_TW.UTF-8", "LANG": "en_US.UTF-8"}, "zh"),
        ("en", {"LANG": "zh_CN.UTF-8"}, "en"),
        ("zh", {}, "zh"),
        ("zh-CN", {}, "zh"),
        ("EN", {}, "en"),
    ],
)
def test_language_from_the_flag_else_the_locale(arg, environ, expected):
    assert resolve_lang(arg, environ) == expected


def test_an_unknown_language_is_a_one_line_error():
    with pytest.raises(FitbenchError, match="unknown language 'fr'"):
        resolve_lang("fr", {})


@pytest.mark.parametrize("arg", ["", " ", "english", "zhx", "chinese", "enzh", "fr_FR.UTF-8"])
def test_a_value_that_only_starts_like_a_language_is_refused_not_read_from_the_locale(arg):
    with pytest.raises(FitbenchError) as err:
        resolve_lang(arg, {"LANG": "zh_CN.UTF-8"})
    assert err.value.text("en")[1] == "use --lang en or --lang zh"
    assert err.value.text("zh")[1] == "请使用 --lang en 或 --lang zh"


@pytest.mark.parametrize(
    ("arg", "expected"), [("zh_CN.UTF-8", "zh"), ("en-US", "en"), ("ZH_tw", "zh"), ("en@x", "en")]
)
def test_a_locale_of_either_language_is_a_language(arg, expected):
    assert resolve_lang(arg, {}) == expected


def test_parameter_counts_read_naturally():
    assert format_params(109_483_778, "en") == "109M"
    assert format_params(6_738_415_616, "en") == "6.7B"
    assert format_params(68_976_648_192, "en") == "69B"
    assert format_params(109_483_778, "zh") == "1.1 亿"
    assert format_params(6_738_415_616, "zh") == "67 亿"
    assert format_params(25_557_032, "zh") == "2556 万"


def test_unknown_key_is_a_bug():
    with pytest.raises(KeyError):
        t("no.such.key", "en")


def test_each_preset_description_has_its_chinese_and_the_same_english():
    """Workloads and stored runs carry a preset's English description; the catalogue's `preset.*`
    entries give its Chinese, so their English must stay the preset's own, word for word."""
    from fitbench.advise.i18n import preset_description
    from fitbench.workloads.presets import PRESETS, TINY_PRESETS

    for key, factories in (("preset", PRESETS), ("preset.tiny", TINY_PRESETS)):
        for name, factory in factories.items():
            english = factory().description
            assert MESSAGES[f"{key}.{name}"]["en"] == english, name
            assert CJK.search(preset_description(english, "zh")), name
            assert preset_description(english, "en") == english
    assert preset_description("llama (32 layers) read from ./config.json", "zh") == (
        "llama (32 layers) read from ./config.json"
    )


def test_each_measurement_warning_and_failure_is_recognised_and_said_in_chinese():
    """A warning or failure stored in English is shown in Chinese when its pattern matches: each
    pattern matches its own message's English (placeholders filled)."""
    from fitbench.advise.i18n import MEASUREMENT_PATTERNS, measurement_text

    samples = {
        "ran": "amp-bf16",
        "how": "bf16 autocast, fp32 master weights",
        "asked": "fp32",
        "dtype": "bf16",
        "device": "cpu",
        "n": "3",
        "of": "10",
        "seconds": "600",
        "built": "1,024",
        "described": "2,048",
        "produced": "7",
        "wanted": "100",
        "why": "no triton",
        "phase": "build",
        "signal": "SIGTERM",
        "code": "1",
        "status": "oom",
        "batch": "64",
        "error": "out of memory",
    }
    for key, pattern in MEASUREMENT_PATTERNS.items():
        english = t(key, "en", **{k: samples[k] for k in _fields(MESSAGES[key]["en"])})
        assert pattern.fullmatch(english), key
        assert measurement_text(english, "en") == english
        assert CJK.search(measurement_text(english, "zh")), key
    assert measurement_text("some framework's own words", "zh") == "some framework's own words"


@pytest.mark.torch
def test_the_torch_backends_warnings_match_their_patterns():
    from fitbench.advise.i18n import measurement_text
    from fitbench.backends.torch.tuned import COMPILE_UNAVAILABLE, CPU_NO_GRAPHS

    assert CJK.search(measurement_text(CPU_NO_GRAPHS, "zh"))
    assert CJK.search(measurement_text(COMPILE_UNAVAILABLE, "zh"))
