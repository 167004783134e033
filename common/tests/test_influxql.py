"""InfluxQL literals: what goes inside quotes and regexes is matched literally."""

from __future__ import annotations

import re

from srv6pm.common.influxql import escape_regex, string_literal


def test_a_string_literal_escapes_quotes_and_backslashes():
    assert string_literal("it's a\\b") == "'it\\'s a\\\\b'"


def test_a_regex_matches_the_value_literally_and_its_delimiter_is_escaped():
    value = "s1.a/b+(c)"
    escaped = escape_regex(value)
    assert escaped == "s1\\.a\\/b\\+\\(c\\)"
    assert re.fullmatch(escaped, value)
    assert not re.fullmatch(escaped, "s1xa/b+(c)")
