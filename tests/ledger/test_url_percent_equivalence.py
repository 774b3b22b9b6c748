"""The dedup key's percent-encoding normalization (issue 13 item 2, RFC 3986 §6.2.2.1–2).

``%7euser``, ``%7Euser`` and ``~user`` are one page; unreserved characters decode in path and
query, every other ``%XX`` is upper-cased and stays encoded (``%2F %3F %26 %23 %25`` and
non-ASCII octets); the URL requested stays the one discovered. The SQL twin of the rule
(migration 060, which recomputes stored keys) is checked against the Python rule on real
Postgres.
"""

from __future__ import annotations

import string
import uuid
from importlib import resources

import psycopg
import pytest
from hypothesis import given, settings, strategies as st

from ledger.crawl.urls import UNRESERVED, normalize_percent, parse_http_url

RESERVED = ":/?#[]@!$&'()*+,;="


def test_tilde_spellings_are_one_key_and_the_requested_url_stays():
    spellings = ["https://x.org/%7euser", "https://x.org/%7Euser", "https://x.org/~user"]
    parsed = [parse_http_url(u) for u in spellings]
    assert {p.key for p in parsed} == {"https://x.org/~user"}
    assert [p.url for p in parsed] == spellings


@pytest.mark.parametrize("a, b", [
    ("https://x.org/%41bc", "https://x.org/Abc"),  # ALPHA
    ("https://x.org/v%31", "https://x.org/v1"),  # DIGIT
    ("https://x.org/a%2Db%2ec%5Fd", "https://x.org/a-b.c_d"),
    ("https://x.org/p?q=%7e&r=%41", "https://x.org/p?q=~&r=A"),  # the query too
    ("https://x.org/p?q=%e2%82%ac", "https://x.org/p?q=%E2%82%AC"),  # hex case, non-ASCII stays encoded
    ("https://x.org/a%2fb", "https://x.org/a%2Fb"),
])
def test_equivalent_spellings(a, b):
    assert parse_http_url(a).key == parse_http_url(b).key


@pytest.mark.parametrize("encoded, plain", [
    ("https://x.org/a%2Fb", "https://x.org/a/b"),  # a path segment boundary
    ("https://x.org/p?q=%3F", "https://x.org/p?q=?"),
    ("https://x.org/p?a=1%26b=2", "https://x.org/p?a=1&b=2"),  # one parameter vs two
    ("https://x.org/p?a=%3D", "https://x.org/p?a=="),
    ("https://x.org/p%23frag", "https://x.org/p#frag"),
])
def test_reserved_encodings_are_not_decoded(encoded, plain):
    assert parse_http_url(encoded).key != parse_http_url(plain).key


def test_stray_percent_is_its_own_encoding():
    assert parse_http_url("https://x.org/100%").key == parse_http_url("https://x.org/100%25").key == "https://x.org/100%25"
    assert parse_http_url("https://x.org/%zz").key == "https://x.org/%25zz"


def test_authority_is_left_to_whatwg():
    p = parse_http_url("https://u%7e@X.org:443/%7e")
    assert p.key == "https://u%7e@x.org/~" and p.host == "x.org"


# -- properties ------------------------------------------------------------------------------

def _encode(char: str, upper: bool) -> str:
    return "".join(f"%{b:02X}" if upper else f"%{b:02x}" for b in char.encode())


PATH_CHARS = st.sampled_from(sorted(UNRESERVED) + list("/!$&'()*+,;=:@%") + ["é", "€"])


@st.composite
def spelled(draw):
    """(plain path+query, the same with random characters percent-encoded in random hex case)."""
    chars = draw(st.lists(PATH_CHARS, min_size=1, max_size=20))
    plain = "/" + "".join(c if c != "%" else "%25" for c in chars)
    out = ["/"]
    for c in chars:
        if c in UNRESERVED and draw(st.booleans()):
            out.append(_encode(c, draw(st.booleans())))
        elif c == "%":
            out.append("%25" if draw(st.booleans()) else "%25".lower())
        else:
            out.append(c)
    query = draw(st.text(alphabet=sorted(UNRESERVED), max_size=6))
    qenc = "".join(_encode(c, draw(st.booleans())) if draw(st.booleans()) else c for c in query)
    return plain + "?q=" + query, "".join(out) + "?q=" + qenc


@settings(max_examples=400, deadline=None)
@given(spelled())
def test_encoding_unreserved_never_changes_the_key(pair):
    plain, encoded = pair
    assert parse_http_url("https://x.org" + plain).key == parse_http_url("https://x.org" + encoded).key


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=string.ascii_letters + string.digits + "%/?&=#~-._" + "aAfF09", max_size=30))
def test_key_is_idempotent_and_still_whatwg(tail):
    try:
        p = parse_http_url("https://x.org/" + tail)
    except ValueError:
        return
    again = parse_http_url(p.key)
    assert again.key == p.key  # a key parses to itself: safe to store and compare
    assert normalize_percent(p.key) == p.key


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(set(RESERVED) - {"%"}) + ["é"]), st.booleans())
def test_reserved_and_non_ascii_stay_encoded_upper_case(char, upper):
    encoded = _encode(char, upper)
    key = parse_http_url(f"https://x.org/a{encoded}b?c={encoded}").key
    assert key == f"https://x.org/a{_encode(char, True)}b?c={_encode(char, True)}"


# -- the SQL twin (migration 060) on real Postgres -------------------------------------------

SQL_SAMPLES = [
    "https://x.org/%7euser", "https://x.org/%7Euser?q=%41%2f%e2%82%ac", "https://x.org/%", "https://x.org/%%35A",
    "https://x.org/%zz%2", "https://u%7e@x.org/%00%7F%2D%2e", "https://x.org/plain", "http://[::1]:8/%5f?%5F#",
]


def _migration_update() -> str:
    text = resources.files("ledger.db.migrations").joinpath("060_url_key_percent_normalization.sql").read_text()
    return text[text.index("WITH changed AS"):]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(alphabet="%0123456789aAbBcCdDeEfFgz~/?=-", max_size=12), min_size=1, max_size=20))
def test_sql_rule_equals_python_rule(migrated_template_conn, tails):
    keys = SQL_SAMPLES + ["https://x.org/" + t for t in tails]
    cur = migrated_template_conn.execute("SELECT waggle_url_key_060(k) FROM unnest(%s::text[]) AS k", (keys,))
    got = [r[0] for r in cur.fetchall()]
    want = [k[:k.index("/", 8)] + normalize_percent(k[k.index("/", 8):]) for k in keys]
    assert got == want


@pytest.fixture(scope="module")
def migrated_template_conn(create_database, migrated_template):
    with psycopg.connect(create_database(template=migrated_template), autocommit=True) as conn:
        yield conn


def test_migration_recomputes_stored_keys_without_losing_rows(migrated_db_url):
    """A crawl stored under the old keys: rows get the new key (so the level report finds
    them), and a page stored twice under two spellings keeps both rows (the oldest takes the key)."""
    with psycopg.connect(migrated_db_url, autocommit=True) as conn:
        crawl = uuid.uuid4()
        conn.execute("INSERT INTO crawls (id, org_id, requested_by, seeds, scope, max_depth, max_pages,"
                     " per_host_delay_ms, host_parallelism, state)"
                     " VALUES (%s, 'acme', 'alice', ARRAY['https://x.org/'], 'same-host', 2, 10, 0, 1, 'running')",
                     (crawl,))
        old = ["https://x.org/%7euser", "https://x.org/%7Euser", "https://x.org/a%2fb", "https://x.org/plain",
               "https://x.org/%41"]
        for key in old + ["https://x.org/A"]:
            conn.execute("INSERT INTO crawl_pages (crawl_id, url, url_key, depth, host) VALUES (%s, %s, %s, 1, 'x.org')",
                         (crawl, key, key))
        conn.execute(_migration_update())
        rows = conn.execute("SELECT url, url_key FROM crawl_pages WHERE crawl_id = %s ORDER BY id", (crawl,)).fetchall()
    assert [r[1] for r in rows] == [
        "https://x.org/~user", "https://x.org/%7Euser",  # the second spelling keeps its row and old key
        "https://x.org/a%2Fb", "https://x.org/plain",
        "https://x.org/%41",  # its new key is held by the row of https://x.org/A: it keeps the old one
        "https://x.org/A",
    ]
    assert [r[0] for r in rows] == old + ["https://x.org/A"]  # what was requested never changes
    for i in (0, 2, 3, 5):
        assert parse_http_url(rows[i][0]).key == rows[i][1]  # the level report finds these rows
