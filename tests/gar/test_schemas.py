"""Schema data (table 1): facts, derivable relations, validation."""

from __future__ import annotations

import json
import shutil

import pytest

from whitebox_eval.errors import WhiteboxError
from whitebox_eval.gar.schemas import DATA_DIR, SCHEMA_FILES, SCHEMA_NAMES, load_schema, load_schemas


def test_seven_schemas_load_with_enough_entities():
    schemas = load_schemas()
    assert list(schemas) == list(SCHEMA_NAMES) and len(schemas) == 7
    for s in schemas.values():
        assert len(s.elements) >= 30, s.name
        assert len(set(s.elements)) == len(s.elements), s.name


@pytest.mark.parametrize("name,relations", [
    ("GendersOfPersons", {"same", "isA", "sameGender"}),
    ("KindsOfThings", {"same", "kindOf", "sameKind"}),
    ("UsagesOfThings", {"same", "usedFor", "sameUsage"}),
    ("Adjectives", {"same", "synonym", "antonym"}),
    ("OccupationOfPersons", {"same", "worksAsA", "sameOccupation"}),
    ("CountriesOfCities", {"same", "inCountryOf", "sameCountry"}),
    ("CountriesOfLandmarks", {"same", "inCountryOf", "sameCountry"}),
])
def test_every_relation_of_table_1_is_derivable(name, relations):
    assert set(load_schema(name).relations) == relations


@pytest.mark.parametrize("schema,rel,x,y,expected", [
    ("CountriesOfCities", "inCountryOf", "Paris", "France", True),
    ("CountriesOfCities", "inCountryOf", "Lyon", "Italy", False),
    ("CountriesOfCities", "sameCountry", "Paris", "Lyon", True),
    ("CountriesOfCities", "sameCountry", "Paris", "Paris", False),
    ("CountriesOfLandmarks", "inCountryOf", "Louvre Museum", "France", True),
    ("CountriesOfLandmarks", "inCountryOf", "Forbidden City", "China", True),
    ("KindsOfThings", "kindOf", "apple", "fruit", True),
    ("KindsOfThings", "kindOf", "dog", "fruit", False),
    ("KindsOfThings", "sameKind", "dog", "cat", True),
    ("UsagesOfThings", "usedFor", "pen", "writing", True),
    ("UsagesOfThings", "usedFor", "car", "driving", True),
    ("OccupationOfPersons", "worksAsA", "Tom Hanks", "actor", True),
    ("OccupationOfPersons", "worksAsA", "Stephen King", "author", True),
    ("GendersOfPersons", "isA", "John", "boy", True),
    ("GendersOfPersons", "isA", "Mary", "boy", False),
    ("GendersOfPersons", "sameGender", "Mary", "Lisa", True),
    ("Adjectives", "synonym", "happy", "glad", True),
    ("Adjectives", "synonym", "happy", "sad", False),
    ("Adjectives", "antonym", "happy", "sad", True),
    ("Adjectives", "antonym", "sad", "glad", True),
    ("Adjectives", "same", "fast", "fast", True),
])
def test_facts(schema, rel, x, y, expected):
    assert load_schema(schema).relation(rel).holds(x, y) is expected


def test_abbreviations_resolve():
    s = load_schema("KindsOfThings")
    assert s.relation("=").name == "same" and s.relation("∈").name == "kindOf"
    assert load_schema("Adjectives").relation("∼").name == "synonym"
    with pytest.raises(WhiteboxError, match="no relation"):
        s.relation("antonym")


def test_each_element_has_one_category():
    for s in load_schemas().values():
        if s.categories:
            for e in s.elements:
                assert len(s.relation(s.category_relation).image(e)) == 1


def _copy_data(tmp_path):
    for stem in SCHEMA_FILES.values():
        shutil.copy(DATA_DIR / f"{stem}.json", tmp_path / f"{stem}.json")


def test_malformed_data_raises_whitebox_error(tmp_path):
    _copy_data(tmp_path)
    path = tmp_path / "kinds_of_things.json"
    raw = json.loads(path.read_text())
    raw["categories"]["fruit"].append("dog")  # dog is also an animal
    path.write_text(json.dumps(raw))
    with pytest.raises(WhiteboxError, match="exactly one category"):
        load_schema("KindsOfThings", tmp_path)
    with pytest.raises(WhiteboxError, match="unknown GAR schema"):
        load_schema("Colours", tmp_path)
