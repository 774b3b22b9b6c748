import pytest

from ledger.settings import MissingSettings, Settings


def test_empty_value_means_absent(monkeypatch):
    monkeypatch.setenv("WAGGLE_S3_BUCKET", "")
    monkeypatch.setenv("WAGGLE_API_PORT", "")
    s = Settings(_env_file=None)
    assert s.s3_bucket is None
    assert s.api_port == 7070


def test_missing_settings_are_reported_together(monkeypatch):
    for name in ("WAGGLE_FGA_STORE_ID", "WAGGLE_S3_BUCKET"):
        monkeypatch.delenv(name, raising=False)
    s = Settings(_env_file=None)
    with pytest.raises(MissingSettings) as info:
        s.require("s3_bucket", "fga_store_id")
    text = str(info.value)
    assert "WAGGLE_S3_BUCKET" in text and "WAGGLE_FGA_STORE_ID" in text
    assert "waggle fga deploy" in text


def test_capture_formats_parse_and_refuse_unknown(monkeypatch):
    monkeypatch.setenv("WAGGLE_CAPTURE_FORMATS", "wacz, links,wacz")
    assert Settings(_env_file=None).capture_formats == ("wacz", "links")
    monkeypatch.setenv("WAGGLE_CAPTURE_FORMATS", "wacz,gif")
    with pytest.raises(ValueError, match="gif"):
        Settings(_env_file=None)


def test_postgres_fixture_creates_databases(empty_db_url):
    import psycopg

    with psycopg.connect(empty_db_url) as conn:
        assert conn.execute("select 1").fetchone() == (1,)
