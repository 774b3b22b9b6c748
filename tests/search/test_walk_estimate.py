"""Decision 431: a word in a few percent of the pages is found by walks even when a thousand
other words are more common (the tsvector's statistics keep 10,000 lexemes, not 1,000)."""

from __future__ import annotations

import asyncio
import random
import uuid
from datetime import datetime, timedelta, timezone

import psycopg

PAGES = 3000
VOCABULARY = [f"filler{i:04d}" for i in range(3000)]  # each in ~5 % of the pages
WORDS_A_PAGE = 150
RARE_SHARE = 0.025  # "quokka": more than the walk's 1 %, rarer than every filler


def _fill(db_url: str) -> None:
    rnd = random.Random(431)
    base = datetime(2026, 1, 1, tzinfo=timezone.utc)
    with psycopg.connect(db_url) as conn:
        with conn.cursor() as cur, cur.copy("COPY archives (id, task_id, correlation_id, bucket, object_key,"
                                            " source_url, captured_at) FROM STDIN") as cp:
            rows = []
            for i in range(PAGES):
                aid = uuid.UUID(int=rnd.getrandbits(128), version=4)
                words = rnd.sample(VOCABULARY, WORDS_A_PAGE) + (["quokka"] if i % int(1 / RARE_SHARE) == 0 else [])
                rows.append((aid, base + timedelta(minutes=i), " ".join(words)))
                cp.write_row((aid, uuid.uuid4(), None, "b", f"k/{aid}", f"https://h.example/{i}", base + timedelta(minutes=i)))
        conn.execute("INSERT INTO search_configs VALUES ('english') ON CONFLICT DO NOTHING")  # as the indexer does
        conn.execute("CREATE TEMP TABLE pages (archive_id uuid, captured_at timestamptz, body text)")
        with conn.cursor() as cur, cur.copy("COPY pages FROM STDIN") as cp:
            for row in rows:
                cp.write_row(row)
        conn.execute("INSERT INTO archive_text (archive_id, host, url, captured_at, config, body, tsv, org_id)"
                     " SELECT archive_id, 'h.example', 'https://h.example/' || archive_id, captured_at, 'english',"
                     " body, to_tsvector('english', body), 'acme' FROM pages")
        conn.commit()
        conn.autocommit = True
        conn.execute("ANALYZE archive_text")


def test_a_word_in_a_few_percent_of_the_pages_walks_among_a_thousand_commoner_ones(migrated_db_url):
    from ledger.search.query import parsed_and_pages, walk_only

    _fill(migrated_db_url)

    async def decide(text: str) -> bool:
        async with await psycopg.AsyncConnection.connect(migrated_db_url, row_factory=psycopg.rows.dict_row) as conn:
            parsed, pages = await parsed_and_pages(conn, text)
            return await walk_only(conn, parsed, pages)

    assert asyncio.run(decide("quokka")) is True  # 2.5 % of the pages: a walk
    assert asyncio.run(decide("wallaby")) is False  # on no page: the planner's GIN

