"""JSON extraction and repair from model replies."""

from bedside.jsonreply import extract_json


def test_exact_json_is_not_a_repair():
    r = extract_json('{"a": 1}')
    assert r.value == {"a": 1} and not r.repaired


def test_fenced_preamble_and_raw_newlines_are_repaired():
    assert extract_json('```json\n{"a": 1}\n```').value == {"a": 1}
    r = extract_json('Sure! Here it is: {"utterance": "line one\nline two"} hope that helps')
    assert r.value == {"utterance": "line one\nline two"} and r.repaired


def test_wrong_type_or_no_json_gives_none():
    assert extract_json("[1, 2]", dict) is None
    assert extract_json("no json here") is None
    assert extract_json('{"utterance": "cut off') is None
    assert extract_json('x [1, {"a": 2}]', list).value == [1, {"a": 2}]


def test_json_bool_strict_and_lenient():
    import pytest

    from bedside.jsonreply import json_bool, lenient_bool

    assert json_bool(True) is True and json_bool(" FALSE ") is False and json_bool("true") is True
    with pytest.raises(ValueError, match="'met' must be true or false"):
        json_bool("maybe", "met")
    assert lenient_bool(" TRUE ") is True and lenient_bool("yes") == "yes"  # left to pydantic


def test_all_values_are_top_level_only_and_trailing_commas_are_repaired():
    from bedside.jsonreply import extract_json_all

    # a fragment nested in a truncated or broken value is never the reply
    assert extract_json_all('{"speak": ["hi"], "actors_present": {"Patient": "x"}') == []
    # prose with quotes around the JSON does not confuse the scan; the last value is listed last
    found = extract_json_all('He said "stop" and {"a": 1} then {"b": {"c": 2}}')
    assert [f.value for f in found] == [{"a": 1}, {"b": {"c": 2}}]
    fixed = extract_json_all('{"a": 1, "b": [1, 2,],\n}')
    assert [f.value for f in fixed] == [{"a": 1, "b": [1, 2]}] and fixed[0].repaired
    assert extract_json_all('{"a": "x,}"}')[0].value == {"a": "x,}"}
