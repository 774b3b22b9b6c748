"""The combined WACZ of a signed crawl (issue 25 follow-up, decision 342): each signed member's
datapackage and signature travel inside it unchanged, so ``waggle verify`` on the combined file
says what is true: the file is not signed as a whole, and how many members' signatures verify
over the very WARC files in it; a WARC that is not the one its member's signature covers is named;
py-wacz still validates the file. Real authsign, pebble and timestamp authority (the local
stack's signing services), real zip files."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.archive import combined
from ledger.archive.offline import EXIT_FAILED, EXIT_UNSIGNED, EXIT_VERIFIED
from tests.archive.helpers import wacz_bytes
from tests.archive.test_signed_wacz import flip_last_byte, rezip, signed_wacz, waggle_verify

VENV_BIN = Path(sys.executable).parent


def combine(members: dict[str, bytes], out: Path) -> Path:
    """``members`` (archive id → WACZ bytes) merged by the ledger's builder into ``out``."""
    rows = [{"archiveId": aid, "url": f"https://example.org/{aid}", "complete": True} for aid in members]
    combined.build(rows, lambda m, path: path.write_bytes(members[m["archiveId"]]), out, title="waggle crawl test",
                   crawl_id="00000000-0000-4000-8000-000000000001", missing=[], main_url="https://example.org/")
    return out


@pytest.fixture(scope="module")
def signed_pair(signing_stack) -> list[bytes]:
    signer = signing_stack.signer()
    return [signed_wacz(signer, "https://example.org/a"), signed_wacz(signer, "https://example.org/b")]


def test_a_combined_file_of_signed_members_verifies_through_their_signatures(signed_pair, signing_stack, tmp_path):
    out = combine({"a1": signed_pair[0], "b2": signed_pair[1]}, tmp_path / "all-signed.wacz")
    done = waggle_verify(out, signing_stack.trusted_roots)
    assert done.returncode == EXIT_VERIFIED, done.stdout + done.stderr
    assert "not signed as a whole" in done.stdout
    assert "2 of 2 members carry their capture's signature, verified" in done.stdout
    assert "signed by: localhost" in done.stdout and "RFC 3161" in done.stdout
    wacz = shutil.which("wacz", path=str(VENV_BIN))
    v = subprocess.run([wacz, "validate", "-f", str(out)], capture_output=True, text=True, timeout=120)
    assert v.returncode == 0, v.stdout + v.stderr


def test_a_partly_signed_crawl_says_how_many_members_are_covered(signed_pair, signing_stack, tmp_path):
    out = combine({"a1": signed_pair[0], "u3": wacz_bytes("https://example.org/u")}, tmp_path / "partly.wacz")
    done = waggle_verify(out, signing_stack.trusted_roots)
    assert done.returncode == EXIT_UNSIGNED, done.stdout + done.stderr
    assert "1 of 2 members carry their capture's signature, verified" in done.stdout
    assert "1 of 2 members are not signed" in done.stdout
    unsigned = combine({"u3": wacz_bytes("https://example.org/u")}, tmp_path / "unsigned.wacz")
    done = waggle_verify(unsigned, signing_stack.trusted_roots)
    assert done.returncode == EXIT_UNSIGNED and "1 of 1 members are not signed" in done.stdout, done.stdout


def test_a_warc_that_is_not_the_signed_one_is_named(signed_pair, signing_stack, tmp_path):
    """A member whose WARC changed after signing (its own check would refuse it): the combined
    file's own hashes match what it holds, but the carried signature covers other bytes."""
    changed = rezip(signed_pair[1], flip_last_byte("archive/data.warc.gz"))
    out = combine({"a1": signed_pair[0], "b2": changed}, tmp_path / "changed.wacz")
    done = waggle_verify(out, signing_stack.trusted_roots)
    assert done.returncode == EXIT_FAILED, done.stdout + done.stderr
    assert "does NOT verify" in done.stdout
    assert "member b2: archive/b2-data.warc.gz is not the archive/data.warc.gz its signature covers" in done.stdout
