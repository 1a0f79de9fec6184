"""ui/tests/fixtures/models.json, the GET /models answer the UI's unit tests check the form against,
is what the engine serves today (its rows for those archs, and the limits): the UI's tests cannot pass
against bounds the engine no longer has. Regenerate: `python -m testing.tests.test_ui_fixture`."""
import json
import os
import tempfile

from testing.engine_client import InProcessEngine

FIXTURE = os.path.join(os.path.dirname(__file__), "..", "..", "ui", "tests", "fixtures", "models.json")


def served() -> dict:
    with tempfile.TemporaryDirectory() as folder:
        eng = InProcessEngine(folder, token="fixture-token-1")
        try:
            return json.loads(json.dumps(eng.client.get("/models").json()))
        finally:
            eng.close()


def fixture_from(answer: dict, names) -> dict:
    return {**answer, "archs": [row for row in answer["archs"] if row["name"] in names]}


def test_the_ui_fixture_is_what_the_engine_serves():
    with open(FIXTURE) as f:
        fixture = json.load(f)
    names = [row["name"] for row in fixture["archs"]]
    assert fixture_from(served(), names) == fixture, f"regenerate it: python -m testing.tests.test_ui_fixture"


if __name__ == "__main__":
    with open(FIXTURE) as f:
        names = [row["name"] for row in json.load(f)["archs"]]
    with open(FIXTURE, "w") as f:
        json.dump(fixture_from(served(), names), f, indent=1)
        f.write("\n")
