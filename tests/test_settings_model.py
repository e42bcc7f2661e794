"""The settings' own validation keeps pydantic's behaviour, and the API's twin agrees.

``CrawlSettings`` is a ``SettingsModel`` (so a crawl's start-up does not import
pydantic); the service validates request bodies with ``ServiceCrawlSettings``,
a pydantic model built from the same declaration. Both must accept and refuse
the same settings, with the same field named.
"""

from __future__ import annotations

import pickle
from typing import Any

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crawler.config import CrawlSettings, HostSettings, RunOptions
from crawler.service.schemas import ServiceCrawlSettings
from crawler.service.settings_schema import pydantic_twin
from crawler.settings_model import SettingsError, SettingsModel, setting, validates


@pytest.mark.parametrize(
    ("given_value", "field", "expected"),
    [
        ("3", "max_depth", 3),  # an environment variable's text
        (" 7 ", "max_urls", 7),
        (4.0, "max_retries", 4),
        ("0.5", "timeout_s", 0.5),
        (2, "timeout_s", 2.0),
        ("yes", "robots", True),
        ("off", "robots", False),
        (0, "insecure", False),
        (None, "max_depth", None),
        (("a", "b"), "include", ["a", "b"]),
    ],
)
def test_lax_values_are_converted_as_pydantic_did(
    given_value: Any, field: str, expected: Any
) -> None:
    value = getattr(CrawlSettings.model_validate({field: given_value}), field)

    assert value == expected
    assert type(value) is type(expected)


@pytest.mark.parametrize(
    ("values", "loc", "message"),
    [
        ({"max_depth": -1}, ("max_depth",), "Input should be greater than or equal to 0"),
        ({"timeout_s": 0}, ("timeout_s",), "Input should be greater than 0"),
        ({"max_redirects": 101}, ("max_redirects",), "Input should be less than or equal to 100"),
        ({"max_depth": "two"}, ("max_depth",), "unable to parse string as an integer"),
        ({"max_depth": 1.5}, ("max_depth",), "fractional part"),
        ({"max_depth": True}, ("max_depth",), "Input should be a valid integer"),
        ({"timeout_s": "soon"}, ("timeout_s",), "Input should be a valid number"),
        ({"robots": "maybe"}, ("robots",), "Input should be a valid boolean"),
        ({"scope": "site"}, ("scope",), "Input should be 'host', 'domain' or 'prefix'"),
        ({"include": "a.*"}, ("include",), "Input should be a valid list"),
        ({"include": [3]}, ("include", 0), "Input should be a valid string"),
        ({"headers": ["x"]}, ("headers",), "Input should be a valid dictionary"),
        (
            {"hosts": {"a.test": {"concurrency": 0}}},
            ("hosts", "a.test", "concurrency"),
            "equal to 1",
        ),
        ({"hosts": {"a.test": {"speed": 1}}}, ("hosts", "a.test", "speed"), "Extra inputs"),
        ({"no_such_setting": 1}, ("no_such_setting",), "Extra inputs are not permitted"),
        ({"include": ["("]}, ("include",), "Value error, invalid regular expression"),
        ({"base_url": "ftp://x"}, ("base_url",), "Value error, expected an http(s) URL"),
    ],
)
def test_bad_values_name_their_field_and_say_why(
    values: dict[str, Any], loc: tuple[str | int, ...], message: str
) -> None:
    with pytest.raises(SettingsError) as caught:
        CrawlSettings.model_validate(values)

    assert caught.value.loc == loc
    assert message in caught.value.message
    assert isinstance(caught.value, ValueError)  # callers that caught pydantic's still catch it


def test_validators_transform_and_defaults_are_fresh() -> None:
    one = CrawlSettings(index_files=["default.htm, .html"])
    assert one.index_files == ["default.htm", "html"]
    first, second = CrawlSettings(), CrawlSettings()
    first.include.append("x")  # frozen fields, mutable lists (as pydantic's)
    assert second.include == []
    assert RunOptions(format="Compact").format == "text"


def test_settings_are_frozen_and_copies_are_not_validated() -> None:
    base = CrawlSettings(max_depth=2)
    with pytest.raises(AttributeError):
        base.max_depth = 3  # type: ignore[misc]  # the point of the test
    copied = base.model_copy(update={"root_dir": "/srv/site"})
    assert (copied.root_dir, copied.max_depth, base.root_dir) == ("/srv/site", 2, None)
    with pytest.raises(SettingsError):
        base.model_copy(update={"no_such_setting": 1})


def test_a_dump_validates_back_to_equal_settings_and_pickles() -> None:
    original = CrawlSettings(
        include=["a"], headers={"X-A": "1"}, hosts={"b.test": HostSettings(concurrency=2)}
    )
    dumped = original.model_dump()

    assert dumped["hosts"] == {
        "b.test": {"concurrency": 2, "request_interval_s": None, "headers": {}, "render": None}
    }
    assert CrawlSettings.model_validate(dumped) == original
    assert pickle.loads(pickle.dumps(original)) == original  # noqa: S301  # our own bytes
    assert CrawlSettings.model_validate(original) is original
    assert original != CrawlSettings()


def test_a_declaration_names_only_its_fields() -> None:
    with pytest.raises(TypeError, match="unknown field 'missing'"):

        class Broken(SettingsModel):
            present: int = setting(default=1, ge=0)

            @validates("missing")
            def _never(value: int) -> int:
                return value

    class Required(SettingsModel):
        name: str

    with pytest.raises(SettingsError, match="Field required"):
        Required()
    assert Required(name="x").name == "x"


# Settings the service takes: values of the right JSON types, in and out of range.
SERVICE_VALUES = st.fixed_dictionaries(
    {},
    optional={
        "max_depth": st.none() | st.integers(-2, 20),
        "max_retries": st.integers(-1, 25),
        "timeout_s": st.floats(-1, 4000, allow_nan=False),
        "scope": st.sampled_from(["host", "domain", "prefix", "site"]),
        "include": st.lists(st.sampled_from(["a.*", "(", "(?=x)", "/docs/"]), max_size=3),
        "headers": st.dictionaries(st.sampled_from(["X-A", "bad name", "Y"]), st.just("v")),
        "index_files": st.lists(st.sampled_from(["index.html", "a/b", ".htm"]), max_size=2),
        "hosts": st.dictionaries(
            st.sampled_from(["a.test", "b.test"]),
            st.fixed_dictionaries({}, optional={"concurrency": st.integers(-1, 3)}),
            max_size=2,
        ),
        "method": st.sampled_from(["head", "get", "post"]),
        "robots": st.booleans(),
    },
)


@settings(max_examples=300, deadline=None)
@given(SERVICE_VALUES)
def test_the_service_twin_accepts_and_refuses_what_the_settings_do(values: dict[str, Any]) -> None:
    try:
        plain: CrawlSettings | None = CrawlSettings.model_validate(values)
        plain_error = None
    except SettingsError as exc:
        plain, plain_error = None, exc
    try:
        twin = ServiceCrawlSettings.model_validate(values)
        twin_error = None
    except pydantic.ValidationError as exc:
        twin, twin_error = None, exc

    assert (plain is None) == (twin is None), (plain_error, twin_error)
    if plain is not None and twin is not None:
        assert CrawlSettings.model_validate(twin.model_dump(mode="json")) == plain
    elif plain_error is not None and twin_error is not None:
        fields = {error["loc"][0] for error in twin_error.errors()}
        assert plain_error.loc[0] in fields


def test_the_twin_keeps_the_service_limits_and_strict_types() -> None:
    with pytest.raises(pydantic.ValidationError, match="less than or equal to 10000"):
        ServiceCrawlSettings.model_validate({"max_depth": 10_001})
    CrawlSettings.model_validate({"max_depth": 10_001})  # the CLI sets no such limit
    with pytest.raises(pydantic.ValidationError):
        ServiceCrawlSettings.model_validate({"max_depth": "3"})
    schema = ServiceCrawlSettings.model_json_schema()
    assert set(schema["properties"]) == set(CrawlSettings.model_fields)
    assert schema["properties"]["max_retries"]["maximum"] == 20


def test_a_service_limit_on_a_field_the_settings_lack_is_refused() -> None:
    with pytest.raises(TypeError, match="no field 'max_dept'"):
        pydantic_twin(CrawlSettings, overrides={"max_dept": (int, pydantic.Field(default=1))})
