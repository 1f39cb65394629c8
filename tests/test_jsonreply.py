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
