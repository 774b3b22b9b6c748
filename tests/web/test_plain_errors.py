"""The start form's errors as sentences a person understands (issue 30 item 4, decision 262).

The API's 400 bodies stay as they are; ``ledger/web/static/plain.js`` rewords their ``fields``
with the form's labels. Here it runs under node against the API's *own* wording — the messages
:class:`ledger.api.crawls.CrawlRequest` and the seed checks produce for bad input of every
kind the form can send — so a change of that wording that the page no longer understands
fails here. No stack needed.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from ledger.api.crawls import CrawlRequest
from ledger.api.errors import validation_fields
from ledger.crawl.crawls import parse_seeds
from ledger.crawl.errors import Refused

STATIC = Path(__file__).resolve().parents[2] / "ledger" / "web" / "static"
# the start form's labels (start.js field(name, label, …))
LABELS = {"seeds": "Seeds", "fromTargets": "Saved targets", "maxDepth": "Depth", "maxPages": "Max pages",
          "perHostDelayMs": "Delay per host", "scope": "Scope", "formats": "Also capture", "include": "Include",
          "exclude": "Exclude", "extraHops": "Extra hops", "timeLimitS": "Time limit", "maxBytes": "Size limit",
          "maxPagesPerHost": "Pages per host"}
NUMERIC = ["maxDepth", "maxPages", "perHostDelayMs", "extraHops", "timeLimitS", "maxBytes", "maxPagesPerHost"]


def api_fields(body: dict) -> dict[str, str]:
    """The ``fields`` of the API's 400 for ``body`` (as ledger.api.errors builds it)."""
    try:
        CrawlRequest.model_validate(body)
    except ValidationError as exc:
        errors = [dict(e, loc=("body", *e["loc"])) for e in exc.errors()]
        return validation_fields(RequestValidationError(errors))
    raise AssertionError(f"accepted: {body}")


def seed_fields(seeds: list[str]) -> dict[str, str]:
    try:
        parse_seeds(seeds, True, "seeds")
    except Refused as exc:
        return exc.body()["fields"]
    raise AssertionError(f"accepted: {seeds}")


def reword(cases: list[tuple[str, str]]) -> list[str]:
    """plain.js's sentence for each ``(field, API message)``, run by node."""
    script = (f"import {{ plainField }} from {json.dumps((STATIC / 'plain.js').as_uri())};\n"
              f"const labels = {json.dumps(LABELS)};\n"
              f"const cases = JSON.parse(process.argv[1]);\n"
              "console.log(JSON.stringify(cases.map(([f, m]) => plainField(f, m, labels))));\n")
    node = shutil.which("node")
    assert node, "node is installed by scripts/bootstrap"
    out = subprocess.run([node, "--input-type=module", "-e", script, json.dumps(cases)],
                         capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


def test_the_issues_examples_read_as_sentences() -> None:
    fields = api_fields({"seeds": [], "maxPages": "abc", "maxDepth": 99, "perHostDelayMs": -1})
    said = dict(zip(fields, reword(list(fields.items()))))
    assert said == {"seeds": "Give at least one seed URL.", "maxPages": "Max pages must be a whole number.",
                    "maxDepth": "Depth must be 10 or less.", "perHostDelayMs": "Delay per host must be 0 or more."}, said


@pytest.mark.parametrize("bad", ["abc", "1.5", "500ms", " ", "-", "1e3"])
def test_every_numeric_field_says_whole_number_for_what_is_not_one(bad: str) -> None:
    # the form sends digits as numbers and anything else as typed (start.js numeric())
    fields = api_fields({"seeds": ["http://127.0.0.1/"], **{name: bad for name in NUMERIC}})
    assert sorted(fields) == sorted(NUMERIC)
    for name, sentence in zip(fields, reword(list(fields.items()))):
        assert sentence == f"{LABELS[name]} must be a whole number.", (name, fields[name], sentence)


def test_bounds_name_the_bound_and_the_label() -> None:
    low = api_fields({"seeds": ["http://127.0.0.1/"], **{name: -5 for name in NUMERIC}})
    high = api_fields({"seeds": ["http://127.0.0.1/"], "maxDepth": 11, "extraHops": 99, "perHostDelayMs": 10**9,
                       "timeLimitS": 10**9})
    for fields in (low, high):
        for name, sentence in zip(fields, reword(list(fields.items()))):
            m = re.fullmatch(rf"{re.escape(LABELS[name])} must be (-?\d+) or (more|less)\.", sentence)
            assert m, (name, fields[name], sentence)
            assert m.group(1) in fields[name]  # the API's own bound


def test_every_sentence_is_one_a_person_reads() -> None:
    """Whatever the API says of the form's fields: no API field name, no validator wording, a
    capital at the start and a stop at the end."""
    cases: list[tuple[str, str]] = []
    for body in ({"seeds": []}, {"seeds": [""]}, {"seeds": ["http://127.0.0.1/"], "include": ["(unclosed"]},
                 {"seeds": ["http://127.0.0.1/"], "exclude": ["a"] * 500}, {"seeds": ["http://x/"], "fromTargets": {}},
                 {"seeds": ["http://127.0.0.1/"], "scope": "galaxy"}, {"seeds": ["http://127.0.0.1/"], "formats": ["png"]}):
        cases += list(api_fields(body).items())
    for seeds in (["not a url"], ["ftp://127.0.0.1/"], ["http://u:p@127.0.0.1/"], ["http://127.0.0.1/" + "p" * 2100]):
        cases += list(seed_fields(seeds).items())
    assert len(cases) >= 10
    for (field, message), sentence in zip(cases, reword(cases)):
        assert sentence[0].isupper() and sentence.endswith((".", "?")), (message, sentence)
        assert not re.search(r"\b(Input should|List should|String should|JSON|Value error|body:)", sentence), (message, sentence)
        assert not re.search(rf"\b{field}\b", sentence) or field.lower() == LABELS.get(field, "").lower(), (message, sentence)
