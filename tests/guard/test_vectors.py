"""The private-host guard's vector table, run against both copies of the module.

Each row: input, expected verdict (a fragment of the reason, or None = allowed). The
copy under ``f/waggle/`` exists for Windmill's import rules and must be byte-identical.
"""

from __future__ import annotations

import importlib
import ipaddress
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COPIES = ["ledger.hostguard", "f.waggle.hostguard"]


@pytest.fixture(params=COPIES)
def guard(request):
    return importlib.import_module(request.param)


def test_copies_are_byte_identical():
    canonical = (ROOT / "ledger/hostguard.py").read_bytes()
    copy = (ROOT / "f/waggle/hostguard.py").read_bytes()
    assert copy == canonical, "f/waggle/hostguard.py differs from ledger/hostguard.py: run scripts/sync-flow-copies"


def test_the_sync_step_finds_and_rewrites_a_stale_copy(tmp_path):
    """scripts/sync-flow-copies --check names a differing copy (exit 1); without --check it writes it."""
    import shutil
    import subprocess
    import sys

    for rel in ("ledger/hostguard.py", "f/waggle/hostguard.py", "ledger/useragent.py", "f/waggle/useragent.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    (tmp_path / "f/waggle/hostguard.py").write_text("# edited by hand\n")
    script = [sys.executable, str(ROOT / "scripts/sync-flow-copies"), "--root", str(tmp_path)]
    check = subprocess.run([*script, "--check"], capture_output=True, text=True)
    assert check.returncode == 1 and "f/waggle/hostguard.py differs" in check.stderr
    assert (tmp_path / "f/waggle/hostguard.py").read_text() == "# edited by hand\n"
    assert subprocess.run(script, capture_output=True).returncode == 0
    assert (tmp_path / "f/waggle/hostguard.py").read_bytes() == (ROOT / "ledger/hostguard.py").read_bytes()
    assert subprocess.run([*script, "--check"], capture_output=True).returncode == 0


def test_copy_is_a_windmill_library_script():
    text = (ROOT / "f/waggle/hostguard.py").read_text()
    header = text.split('"""', 1)[0]  # the PEP 723 block Windmill reads for dependencies
    assert header.startswith("# /// script\n") and header.rstrip().endswith("# ///")
    assert '"httpx==0.28.1"' in header and '"ada-url==4.0.0"' in header
    assert "def main(" not in text  # a library script: no main, empty schema
    meta = (ROOT / "f/waggle/hostguard.script.yaml").read_text()
    assert "kind: script" in meta and "properties: {}" in meta


# -- addresses ------------------------------------------------------------------------------

ADDRESSES = [
    # IPv4 blocked
    ("127.0.0.1", "loopback"),
    ("127.255.255.254", "loopback"),
    ("10.0.0.1", "RFC 1918"),
    ("172.16.0.1", "RFC 1918"),
    ("172.31.255.255", "RFC 1918"),
    ("192.168.1.1", "RFC 1918"),
    ("169.254.169.254", "link-local"),
    ("100.64.0.1", "carrier-grade NAT"),
    ("100.127.255.255", "carrier-grade NAT"),
    ("0.0.0.0", "'this network'"),
    ("0.1.2.3", "'this network'"),
    ("192.0.0.8", "192.0.0.0/24"),
    ("192.0.0.170", "192.0.0.0/24"),
    ("198.18.0.1", "benchmarking"),
    ("198.19.255.255", "benchmarking"),
    ("192.0.2.1", "documentation"),
    ("198.51.100.7", "documentation"),
    ("203.0.113.9", "documentation"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("255.255.255.255", "broadcast"),
    ("240.0.0.1", "reserved"),
    # IPv4 allowed (edges of blocked ranges included)
    ("8.8.8.8", None),
    ("1.1.1.1", None),
    ("172.15.255.255", None),
    ("172.32.0.0", None),
    ("100.63.255.255", None),
    ("100.128.0.0", None),
    ("198.17.255.255", None),
    ("198.20.0.0", None),
    ("192.0.3.1", None),
    ("169.253.255.255", None),
    ("223.255.255.255", None),
    # IPv6 blocked
    ("::1", "loopback"),
    ("::", "unspecified"),
    ("fc00::1", "unique-local"),
    ("fd12:3456:789a::1", "unique-local"),
    ("fe80::1", "link-local"),
    ("fe80::1%eth0", "link-local"),
    ("[fe80::1]", "link-local"),
    ("fec0::1", "site-local"),
    ("ff02::1", "multicast"),
    ("2001:db8::1", "documentation"),
    ("100::1", "discard"),
    ("2001::1", "non-global"),  # Teredo
    # IPv4 inside IPv6, unwrapped
    ("::ffff:127.0.0.1", "loopback"),
    ("::ffff:7f00:1", "loopback"),
    ("::ffff:10.1.2.3", "RFC 1918"),
    ("::ffff:169.254.169.254", "link-local"),
    ("::127.0.0.1", "loopback"),
    ("::10.0.0.1", "RFC 1918"),
    ("2002:7f00:1::", "loopback"),  # 6to4
    ("2002:c0a8:101::1", "RFC 1918"),
    ("64:ff9b::a9fe:a9fe", "link-local"),  # NAT64 of 169.254.169.254
    ("64:ff9b::7f00:1", "loopback"),
    # IPv6 allowed
    ("2606:4700:4700::1111", None),
    ("2a00:1450:4001:80b::200e", None),
    ("::ffff:8.8.8.8", None),
    ("::8.8.8.8", None),
    ("2002:808:808::1", None),
    ("64:ff9b::808:808", None),
]


@pytest.mark.parametrize(("address", "expected"), ADDRESSES)
def test_is_blocked_address(guard, address, expected):
    reason = guard.is_blocked_address(address)
    if expected is None:
        assert reason is None
    else:
        assert reason is not None and expected in reason, reason


def test_is_blocked_address_accepts_ipaddress_objects(guard):
    assert "loopback" in guard.is_blocked_address(ipaddress.ip_address("127.0.0.2"))
    assert guard.is_blocked_address(ipaddress.ip_address("9.9.9.9")) is None


@pytest.mark.parametrize("bad", ["", "localhost", "1.2.3", "300.1.1.1", "::g"])
def test_is_blocked_address_rejects_non_addresses(guard, bad):
    with pytest.raises(ValueError):
        guard.is_blocked_address(bad)


# -- URLs (no DNS) ---------------------------------------------------------------------------

URLS = [
    # literal spellings of loopback / private / metadata addresses
    ("http://127.0.0.1/", "loopback"),
    ("http://127.1/", "loopback"),
    ("http://2130706433/", "loopback"),
    ("http://0x7f000001/", "loopback"),
    ("http://0x7f.1/", "loopback"),
    ("http://0177.0.0.1/", "loopback"),
    ("http://017700000001/", "loopback"),
    ("http://0x7F.0.0.1/", "loopback"),
    ("http://127.0.0.1./", "loopback"),
    ("http://%31%32%37.0.0.1/", "loopback"),
    ("http://１２７.０.０.１/", "loopback"),  # full-width digits, IDNA-mapped
    ("http://0/", "'this network'"),
    ("http://0.0.0.0:8080/", "'this network'"),
    ("http://0300.0250.1.1/", "RFC 1918"),  # 192.168.1.1 in octal
    ("http://3232235777/", "RFC 1918"),  # 192.168.1.1 as an integer
    ("http://10.1/", "RFC 1918"),
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("http://0xa9fea9fe/", "link-local"),
    ("http://100.100.100.200/", "carrier-grade NAT"),  # Alibaba metadata
    ("http://[::1]/", "loopback"),
    ("http://[0:0:0:0:0:0:0:1]:8080/", "loopback"),
    ("http://[::]/", "unspecified"),
    ("http://[::ffff:127.0.0.1]/", "loopback"),
    ("http://[::ffff:169.254.169.254]/", "link-local"),
    ("http://[::127.0.0.1]/", "loopback"),
    ("http://[fd00:ec2::254]/", "unique-local"),  # AWS IMDS over IPv6
    ("http://[fe80::1]/", "link-local"),
    ("https://[ff02::1]/", "multicast"),
    ("http://224.0.0.251/", "multicast"),
    ("http://255.255.255.255/", "broadcast"),
    ("http://192.0.2.10/", "documentation"),
    ("http://198.51.100.10/", "documentation"),
    ("http://203.0.113.10/", "documentation"),
    ("http://[2001:db8::1]/", "documentation"),
    ("http://198.18.0.1/", "benchmarking"),
    ("http://192.0.0.1/", "192.0.0.0/24"),
    # names
    ("http://localhost/", "internal host name"),
    ("http://LOCALHOST:8080/", "internal host name"),
    ("http://localhost./", "internal host name"),
    ("http://app.localhost/", "internal host name"),
    ("http://printer.local/", "internal host name"),
    ("http://Printer.Local./", "internal host name"),
    ("http://db.internal/", "internal host name"),
    ("http://metadata/", "internal host name"),
    ("http://metadata.google.internal/computeMetadata/v1/", "internal host name"),
    ("http://metadata.goog/", "internal host name"),
    ("http://x.metadata.goog/", "internal host name"),
    ("http://user:pass@localhost/", "internal host name"),
    # schemes
    ("file:///etc/hostname", "scheme 'file'"),
    ("ftp://example.com/", "scheme 'ftp'"),
    ("gopher://example.com/", "scheme 'gopher'"),
    ("javascript:alert(1)", "scheme 'javascript'"),
    ("data:text/plain,hi", "scheme 'data'"),
    ("ws://example.com/", "scheme 'ws'"),
    # not URLs
    ("not a url", "not a valid URL"),
    ("http://", "not a valid URL"),
    ("http://exa mple.com/", "not a valid URL"),
    ("http://999.1.1.1/", "not a valid URL"),
    # allowed
    ("http://example.com/", None),
    ("https://example.com:8443/a?b=c#d", None),
    ("HTTP://EXAMPLE.COM/", None),
    ("http://bücher.example/", None),
    ("http://xn--bcher-kva.example/", None),
    ("http://user:secret@example.com/", None),
    ("http://8.8.8.8/", None),
    ("http://[2606:4700:4700::1111]/", None),
    ("http://localhost.example.com/", None),
    ("http://local/", None),
    ("http://internal.example.com/", None),
    ("http://metadata.example.com/", None),
    ("http://mylocal/", None),
    ("http://1.2.3.4.example/", None),
]


@pytest.mark.parametrize(("url", "expected"), URLS)
def test_check_url(guard, url, expected):
    if expected is None:
        href = guard.check_url(url)
        assert href.startswith(("http://", "https://"))
    else:
        with pytest.raises(guard.HostRefused) as info:
            guard.check_url(url)
        assert expected in info.value.reason, info.value.reason
        assert info.value.url == url
        assert isinstance(info.value, ValueError)
        assert url in str(info.value) and info.value.reason in str(info.value)


def test_check_url_returns_whatwg_normalized_href(guard):
    assert guard.check_url("HTTP://Bücher.Example:80/a/../b") == "http://xn--bcher-kva.example/b"


def test_check_url_rejects_non_strings(guard):
    with pytest.raises(guard.HostRefused):
        guard.check_url(None)  # type: ignore[arg-type]


# -- resolve_checked (injected resolver, no DNS traffic) ---------------------------------------

def test_resolve_checked_every_address_must_pass(guard):
    answers = {"mixed.example": ["93.184.216.34", "10.0.0.5"], "ok.example": ["93.184.216.34", "2606:2800:220:1::1"]}
    resolver = lambda host, port: answers[host]  # noqa: E731
    assert guard.resolve_checked("ok.example", 443, resolver=resolver) == answers["ok.example"]
    with pytest.raises(guard.HostRefused) as info:
        guard.resolve_checked("mixed.example", 443, resolver=resolver)
    assert "RFC 1918" in info.value.reason and "mixed.example:443" == info.value.url


def test_resolve_checked_names_and_literals_need_no_resolver(guard):
    def never(host, port):
        raise AssertionError(f"resolver called for {host}")

    with pytest.raises(guard.HostRefused):
        guard.resolve_checked("localhost", 80, resolver=never)
    with pytest.raises(guard.HostRefused):
        guard.resolve_checked("0x7f.1", 80, resolver=never)
    with pytest.raises(guard.HostRefused):
        guard.resolve_checked("::ffff:127.0.0.1", 80, resolver=never)
    assert guard.resolve_checked("8.8.8.8", 53, resolver=never) == ["8.8.8.8"]
    assert guard.resolve_checked("134744072", 53, resolver=never) == ["8.8.8.8"]


def test_resolve_checked_empty_answer_and_opt_out(guard):
    with pytest.raises(guard.HostRefused) as info:
        guard.resolve_checked("void.example", 80, resolver=lambda h, p: [])
    assert "no address" in info.value.reason
    got = guard.resolve_checked("lan.example", 80, resolver=lambda h, p: ["192.168.0.2"], allow_private=True)
    assert got == ["192.168.0.2"]
    assert guard.resolve_checked("localhost", 80, resolver=lambda h, p: ["127.0.0.1"], allow_private=True) == ["127.0.0.1"]


def test_resolve_checked_uses_the_system_resolver_by_default(guard):
    # "localhost" is refused by name before any lookup; a numeric host never touches DNS.
    with pytest.raises(guard.HostRefused):
        guard.resolve_checked("localhost", 80)
    assert guard.resolve_checked("127.0.0.1", 80, allow_private=True) == ["127.0.0.1"]
