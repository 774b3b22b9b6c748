"""The product token's one source (ledger/useragent.py, copied to f/waggle/useragent.py): the copy
is identical, the version is the package's, and robots.txt is fetched with it."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from f.waggle import robots
from f.waggle import useragent as flow_copy
from ledger import useragent

ROOT = Path(__file__).resolve().parents[2]


def test_flow_copy_is_identical():
    assert (ROOT / "f/waggle/useragent.py").read_bytes() == (ROOT / "ledger/useragent.py").read_bytes(), \
        "f/waggle/useragent.py differs from ledger/useragent.py: run scripts/sync-flow-copies"
    assert flow_copy.USER_AGENT == useragent.USER_AGENT


def test_version_is_the_package_version():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert useragent.VERSION == project["version"]


def test_robots_user_agent_is_the_product_with_an_info_url():
    assert robots.USER_AGENT == f"waggle/{useragent.VERSION} (+{useragent.INFO_URL})" == useragent.suffix()
    assert robots.PRODUCT_TOKEN == "waggle" and re.fullmatch(r"[A-Za-z_-]+", robots.PRODUCT_TOKEN)
    assert useragent.suffix("https://ops.example/bot", "9.9") == "waggle/9.9 (+https://ops.example/bot)"
