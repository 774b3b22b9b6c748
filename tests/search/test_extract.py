"""Page text out of a WACZ's WARC: title, headings, visible body, language; PDFs; redirects."""

from __future__ import annotations

import io

import pytest

from ledger.search.extract import from_html, primary_subtag
from ledger.search.wacz_text import NoText, text_of_wacz
from tests.search.helpers import html_page, pdf_bytes, wacz


def test_title_headings_visible_text_and_declared_language():
    t = from_html(b"""<!doctype html><html lang="de-AT"><head><title> Die  Leuchtt\xc3\xbcrme </title>
        <style>.x{color:red}</style><script>var hidden = "scriptword";</script></head>
        <body><h1>Nordsee</h1><p>Der W\xc3\xa4rter <b>z\xc3\xa4hlt</b> Schiffe.</p><h3>Ebbe</h3>
        <noscript>noscriptword</noscript><template>templateword</template></body></html>""")
    assert t.title == "Die Leuchttürme"
    assert t.headings.split("\n") == ["Nordsee", "Ebbe"]
    assert "Der Wärter zählt Schiffe." in t.body
    for hidden in ("scriptword", "noscriptword", "templateword", "color:red"):
        assert hidden not in t.body
    assert (t.lang, t.lang_source) == ("de", "html")


@pytest.mark.parametrize("text, lang", [
    ("Le gardien du phare compte les navires qui entrent dans le port chaque nuit.", "fr"),
    ("The keeper of the lighthouse counts the ships that enter the harbour every night.", "en"),
])
def test_language_is_detected_when_html_does_not_say(text, lang):
    t = from_html(f"<html><body><p>{text}</p></body></html>")
    assert (t.lang, t.lang_source) == (lang, "detected")


def test_too_little_text_has_no_language():
    t = from_html("<html><body>ok</body></html>")
    assert (t.lang, t.lang_source) == (None, None)


@pytest.mark.parametrize("value, want", [("en", "en"), ("EN-gb", "en"), ("pt_BR", "pt"), ("", None),
                                         ("not a tag", None), ("x", None), (None, None)])
def test_primary_subtag(value, want):
    assert primary_subtag(value) == want


def test_control_characters_never_reach_the_text():
    t = from_html("<html><title>a\x02b\x00c</title><body>d\x03e\x01f</body></html>")
    assert not any(c in t.title + t.body for c in "\x00\x01\x02\x03")


def test_charset_from_content_type_decodes_the_page():
    url = "https://latin.example/"
    body = "<html><title>Caf\u00e9</title><body>cr\u00e8me br\u00fbl\u00e9e</body></html>".encode("latin-1")
    data = wacz(url, [(url, 200, "text/html; charset=iso-8859-1", body, {})])
    t = text_of_wacz(io.BytesIO(data))
    assert t.title == "Café" and "crème brûlée" in t.body


def test_the_page_record_is_chosen_after_its_redirects_not_a_subresource():
    start, final = "https://r.example/old", "https://r.example/new/"
    data = wacz(start, [
        ("https://r.example/frame.html", 200, "text/html", b"<html><title>frame</title><body>subframe</body></html>", {}),
        (start, 301, "text/html", b"", {"Location": "/new/"}),
        (final, 200, "text/html", b"<html><title>The new page</title><body>moved here</body></html>", {}),
    ])
    t = text_of_wacz(io.BytesIO(data))
    assert t.title == "The new page"


def test_a_pdf_page_is_indexed_through_its_text():
    url = "https://p.example/report.pdf"
    data = wacz(url, [(url, 200, "application/pdf", pdf_bytes("Annual tide report for the harbour", "Tides 2026"), {})])
    t = text_of_wacz(io.BytesIO(data))
    assert t.title == "Tides 2026" and "Annual tide report" in t.body


def test_a_broken_pdf_or_no_document_is_no_text():
    url = "https://p.example/broken.pdf"
    with pytest.raises(NoText, match="PDF"):
        text_of_wacz(io.BytesIO(wacz(url, [(url, 200, "application/pdf", b"%PDF-1.4 garbage", {})])))
    with pytest.raises(NoText, match="no HTML or PDF"):
        text_of_wacz(io.BytesIO(wacz(url, [(url, 200, "image/png", b"\x89PNG", {})])))
    with pytest.raises(NoText, match="could not be read"):
        text_of_wacz(io.BytesIO(b"not a zip"))


def test_whole_page_path():
    t = text_of_wacz(io.BytesIO(html_page("https://a.example/", "<html lang=en><title>A</title><h2>B</h2>C</html>")))
    assert (t.title, t.headings, t.lang) == ("A", "B", "en")
