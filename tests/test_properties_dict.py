"""driver_get_properties() is a dict as upstream returns, with typed attributes."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle

import pytest

import hipfile
from hipfile import DriverProperties, FeatureFlags

pytestmark = pytest.mark.needs("hipFileDriverGetProperties")


@pytest.fixture
def props() -> DriverProperties:
    with hipfile.Driver():
        return hipfile.driver_get_properties()


def test_is_a_dict_equal_to_its_plain_copy(props: DriverProperties) -> None:
    assert isinstance(props, dict)
    plain = dict(props)
    assert type(plain) is dict
    assert props == plain and plain == props
    assert plain == {f.name: getattr(props, f.name) for f in dataclasses.fields(props)}
    assert props != {**plain, "feature_flags": plain["feature_flags"] + 1}
    assert all(type(v) is int for v in props.values())


def test_json_round_trip(props: DriverProperties) -> None:
    assert json.loads(json.dumps(props)) == props


def test_typed_attributes_stay(props: DriverProperties) -> None:
    assert props.feature_flags == props["feature_flags"]
    assert isinstance(props.features, FeatureFlags)
    with pytest.raises(dataclasses.FrozenInstanceError):
        props.feature_flags = 0  # type: ignore[misc]


@pytest.mark.parametrize("mutate", [
    lambda p: p.__setitem__("feature_flags", 0),
    lambda p: p.__delitem__("feature_flags"),
    lambda p: p.update(feature_flags=0),
    lambda p: p.pop("feature_flags"),
    lambda p: p.popitem(),
    lambda p: p.setdefault("x", 1),
    lambda p: p.clear(),
])
def test_read_only(props: DriverProperties, mutate: object) -> None:
    before = dict(props)
    with pytest.raises(TypeError, match="read-only"):
        mutate(props)  # type: ignore[operator]
    assert props == before


def test_copies_and_pickles(props: DriverProperties) -> None:
    for other in (pickle.loads(pickle.dumps(props)), copy.copy(props), copy.deepcopy(props)):
        assert type(other) is DriverProperties
        assert other == props and other.features == props.features
