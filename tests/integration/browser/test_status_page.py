"""The live status page in a real headless browser (Debian's chromium, driven by Playwright
with ``executable_path``: Playwright never downloads a browser here).

Three peers; the page of one survivor shows the leader and the leader change the peer
remembers from before the page was opened, a topic's records and publish rate appear live,
the leader is killed, and the same page -- without a reload -- shows the new leader and
the old one down; the history charts (uPlot, served by the peer) draw the publishes. A
screenshot of the page is written to ``$RAFTLOG_SCREENSHOT`` when that is set (docs/ keeps one).
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from integration.cluster import PeerCluster
from integration.peer.monitoring_helpers import publish_batches

CHROMIUM = os.environ.get("RAFTLOG_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]

if not (os.path.exists(CHROMIUM) or shutil.which("chromium")):
    pytest.skip(
        f"no chromium at {CHROMIUM}: `make test` installs Debian's chromium when run as root; "
        "otherwise apt-get install chromium (or set RAFTLOG_CHROMIUM)",
        allow_module_level=True,
    )

sync_api = pytest.importorskip("playwright.sync_api")


@pytest.fixture
def page() -> Iterator[object]:
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        try:
            yield browser.new_page(viewport={"width": 1280, "height": 820})
        finally:
            browser.close()


def test_the_page_follows_a_leader_change_live(tmp_path: Path, page: object) -> None:
    page_: sync_api.Page = page  # type: ignore[assignment]
    with PeerCluster(tmp_path, http=True) as cluster:
        cluster.start()
        leader = cluster.wait_stable_leader()
        watcher = next(p for p in cluster.peers if p != leader)
        base = cluster.peers[watcher].http_url
        assert base is not None
        page_.goto(base + "/")
        # the leader row, from the page itself
        page_.wait_for_selector(
            f'#members tr[data-peer="{leader}"][data-role="leader"]', timeout=30_000
        )
        page_.wait_for_selector(f'#leader[data-leader="{leader}"]', timeout=10_000)
        assert page_.inner_text("#state") == "healthy"
        # this peer's own Raft links: up to the two others, none to itself
        page_.wait_for_selector(f'#members tr[data-peer="{leader}"][data-link="up"]')
        assert page_.get_attribute(f'#members tr[data-peer="{watcher}"]', "data-link") == "self"
        # this peer's disk use, from the disk guard's reading (issue #33 item 7)
        assert "guard at" in page_.inner_text("#disk")
        # the election happened before the page was opened: the peer's own ring shows it
        page_.wait_for_selector("#elections li[data-term]", timeout=10_000)
        assert f"peer {leader} leads" in page_.inner_text("#elections")
        with ThreadPoolExecutor(1) as pool:  # Playwright's sync API holds this thread's loop
            pool.submit(asyncio.run, publish_batches(cluster, "orders", 30, 10)).result(120)
        page_.wait_for_selector(
            '#topics tr[data-topic="orders"][data-records="300"]', timeout=30_000
        )
        page_.wait_for_function(
            """() => document.querySelector('#topics tr[data-topic="orders"] .rate')
                       .textContent.endsWith('rec/s')""",
            timeout=30_000,
        )
        # the history charts (issue #33 item 5): uPlot canvases with the publishes in them
        for chart in ("publish", "latency", "lag", "topics"):
            page_.wait_for_selector(f"#chart-{chart} canvas", timeout=30_000)
        page_.wait_for_function(
            """() => Number(document.querySelector('#chart-publish').dataset.max) > 0
                  && Number(document.querySelector('#chart-topics').dataset.max) > 0
                  && Number(document.querySelector('#chart-publish').dataset.points) >= 2""",
            timeout=30_000,
        )
        assert "orders" in page_.inner_text("#chart-topics .u-legend")
        assert page_.eval_on_selector(  # the canvas has pixels drawn, not only a size
            "#chart-publish canvas",
            "c => c.width > 0 && c.height > 0 && c.toDataURL().length > 2000",
        )
        # commit latency is the leader's: its own page charts it
        leader_base = cluster.peers[leader].http_url
        assert leader_base is not None
        browser = page_.context.browser
        assert browser is not None
        leader_page = browser.new_page(viewport={"width": 1280, "height": 820})
        try:
            leader_page.goto(leader_base + "/")
            leader_page.wait_for_function(
                "() => Number(document.querySelector('#chart-latency').dataset.max) > 0",
                timeout=30_000,
            )
            assert leader_page.is_hidden("#latency-note")
        finally:
            leader_page.close()

        cluster.kill(leader)
        new_leader = cluster.wait_leader(exclude=leader, timeout=30)
        page_.wait_for_selector(f'#leader[data-leader="{new_leader}"]', timeout=30_000)
        page_.wait_for_selector(
            f'#members tr[data-peer="{leader}"][data-role="down"]', timeout=10_000
        )
        page_.wait_for_selector(
            f'#members tr[data-peer="{leader}"][data-link="down"]', timeout=10_000
        )
        assert page_.inner_text("#state") == "degraded"
        shot = os.environ.get("RAFTLOG_SCREENSHOT")
        if shot:
            page_.screenshot(path=shot, full_page=True)


def _member(pid: str, *, link_up: bool | None, role: str = "follower") -> dict[str, object]:
    return {
        "id": pid, "url": f"tcp://10.0.0.{pid}:8047", "voter_in": "new", "http_url": None,
        "self": link_up is None, "link_up": link_up, "clock_offset_ms": 0.0, "up": True,
        "role": role, "term": 3, "commit_index": 9, "applied_index": 9, "last_index": 9,
        "last_seen": 0.0, "lag": 0,
    }


def test_a_member_that_answers_without_a_raft_link_degrades_the_page(page: object) -> None:
    """All three members answer the page's poll, but this peer's own link to one is down
    (an asymmetric partition, a peer-key mismatch): the page says degraded and names it.
    The page is the peer's own file; its data is a crafted ``/api/cluster`` answer, because
    a real cluster cannot be held in that state on one loopback without namespaces."""
    page_: sync_api.Page = page  # type: ignore[assignment]
    package = Path(__file__).resolve().parents[3] / "raftlog" / "observability"
    cluster_data = {
        "ready": True, "self": "1", "generated_at": 0.0, "leader_id": "2", "term": 3,
        "config": {"index": 1, "joint": False},
        "members": [
            _member("1", link_up=None),
            _member("2", link_up=True, role="leader"),
            _member("3", link_up=False),
        ],
        "elections": [], "topics": {"count": 0, "names": [], "stats": []}, "groups": [],
        "pending_updates": 0, "request_entries_streams": 0, "clock_warnings": [],
        "disk": {"free_bytes": None, "min_free_bytes": 0, "publishes_refused": False},
    }

    def answer(route: sync_api.Route) -> None:
        url = route.request.url
        if url.endswith("/api/cluster"):
            route.fulfill(json=cluster_data)
        elif "/api/history" in url:
            route.fulfill(json={"interval": 1.0, "capacity": 600, "samples": []})
        elif "/static/" in url:
            route.fulfill(path=str(package / "static" / url.rsplit("/", 1)[1]))
        else:
            route.fulfill(path=str(package / "status.html"), content_type="text/html")

    page_.route("http://status.invalid/**", answer)
    page_.goto("http://status.invalid/")
    page_.wait_for_selector('#members tr[data-peer="3"][data-link="down"]', timeout=10_000)
    assert page_.get_attribute('#members tr[data-peer="2"]', "data-link") == "up"
    assert page_.get_attribute('#members tr[data-peer="1"]', "data-link") == "self"
    assert page_.inner_text("#state") == "degraded"
    assert "no Raft link from this peer to 3" in page_.inner_text("#state-detail")
    cluster_data["members"] = [_member("1", link_up=None), _member("2", link_up=True,
                               role="leader"), _member("3", link_up=True)]
    page_.wait_for_selector('#members tr[data-peer="3"][data-link="up"]', timeout=10_000)
    assert page_.inner_text("#state") == "healthy"
    assert "no Raft link" not in page_.inner_text("#state-detail")
