"""The console in a real headless Chromium against a real ``braid standalone``: the overview, a
scalable topic's DAG, a split made from the page and one made elsewhere appearing live, an
auto-scale split with its reason, keyboard reachability, text contrast, and the render time of a
1,000-segment DAG (measured in the browser). Each page's screenshot goes to
``build/console-screenshots/`` for a person to look at; the figures to ``figures.txt`` there.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import braid
from braid.admin.client import AdminClient
from braid.cli.process import StandaloneProcess
from braid.core.layout import SegmentLayout
from braid.core.layout_codec import layout_to_metadata
from tests.support.browser import SCREENSHOTS, screenshot, wait_js
from tests.support.polling import wait_for

_figures: dict[str, str] = {}


def _record(name: str, value: str) -> None:
    _figures[name] = value
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    lines = [f"{k}: {v}" for k, v in sorted(_figures.items())]
    (SCREENSHOTS / "figures.txt").write_text("\n".join(lines) + "\n")


def _open(browser: Any, standalone: StandaloneProcess, path: str) -> None:
    browser.get(standalone.web_url + path)
    wait_js(browser, "window.braidConsole && window.braidConsole.ready", message="the page to load")
    # A marker that a reload would lose: "without reloading" is checked against it.
    browser.execute_script("window.braidConsole.loadMarker = 'kept';")


def _live(browser: Any) -> None:
    wait_js(browser, "document.getElementById('live').textContent === 'live'", message="live")


def _hover(browser: Any, selector: str) -> None:
    browser.execute_script(
        "document.querySelector(arguments[0]).dispatchEvent(new PointerEvent('pointerover',"
        " {bubbles: true, clientX: 200, clientY: 300}));",
        selector,
    )


def _segment_ids(browser: Any, state: str) -> set[int]:
    ids = browser.execute_script(
        f"return [...document.querySelectorAll('#dag g.seg.{state}')].map(g => +g.dataset.id);"
    )
    return set(ids)


def test_overview_lists_scalable_and_classic_topics_and_filters_them(
    browser: Any, standalone: StandaloneProcess, admin: AdminClient
) -> None:
    admin.scalable_topics.create("topic://public/default/overview-orders", segments=2)
    admin.topics.create("persistent://public/default/overview-classic")
    _open(browser, standalone, "/console")
    _live(browser)
    wait_js(
        browser,
        "document.querySelector('tr[data-topic=\"topic://public/default/overview-orders\"]')",
    )
    rows = browser.execute_script(
        "return [...document.querySelectorAll('tr[data-topic]')].map(r => r.dataset.topic);"
    )
    assert "persistent://public/default/overview-classic" in rows
    kinds = browser.execute_script(
        "return [...document.querySelectorAll('tr[data-topic]')]"
        ".map(r => r.dataset.topic + '=' + r.children[1].textContent);"
    )
    assert "topic://public/default/overview-orders=scalable" in kinds
    assert "persistent://public/default/overview-classic=classic" in kinds
    assert "broker ok" in browser.find_element("id", "health").text
    screenshot(browser, "overview")

    browser.find_element("id", "filter").send_keys("classic")
    shown = wait_js(
        browser,
        "(() => { const r = [...document.querySelectorAll('tr[data-topic]')]"
        ".map(r => r.dataset.topic); return r.length === 1 && r; })()",
    )
    assert shown == ["persistent://public/default/overview-classic"]
    link = "a[href='/console/topic/public/default/overview-orders']"
    browser.find_element("id", "filter").clear()
    browser.execute_script("document.getElementById('filter').dispatchEvent(new Event('input'))")
    wait_js(browser, f'document.querySelector("{link}")')


def test_topic_page_draws_the_dag_and_a_segment_tooltip(
    browser: Any, standalone: StandaloneProcess, admin: AdminClient
) -> None:
    topic = "topic://public/default/drawn"
    admin.scalable_topics.create(topic, segments=2)
    admin.scalable_topics.split(topic, 0)
    admin.scalable_topics.create_subscription(topic, "audit")
    _open(browser, standalone, "/console/topic/public/default/drawn")
    _live(browser)
    assert _segment_ids(browser, "active") == {1, 2, 3}
    assert _segment_ids(browser, "sealed") | _segment_ids(browser, "draining") == {0}
    # The box of segment 1 (half the ring) is twice as tall as each child of segment 0.
    heights = browser.execute_script(
        "const h = id => document.querySelector(`#dag g.seg[data-id='${id}'] rect`)"
        ".getBBox().height; return [h(1), h(2), h(3)];"
    )
    assert abs(heights[0] - 2 * heights[1]) < 2 and abs(heights[1] - heights[2]) < 1
    # Hover shows range, parents, epochs and the owner broker (a child of a split has an owner
    # once its topic is loaded, which may come after the page's first refresh: hover again).
    tooltip = "document.getElementById('tooltip')"
    shown: list[str] = []

    def owner_shown() -> bool:
        _hover(browser, "#dag g.seg[data-id='2'] rect")
        shown.append(wait_js(browser, f"!{tooltip}.hidden && {tooltip}.textContent"))
        return "pulsar://" in shown[-1]

    wait_for(owner_shown, within=30, interval=0.5, message=lambda: f"an owner in {shown[-1:]}")
    tip = shown[-1]
    assert "0x0000\u20130x3fff" in tip and "#0" in tip and "epoch 1" in tip
    timeline = browser.find_element("id", "timeline").text
    assert "Split #0 → #2, #3" in timeline and "manual change" in timeline
    wait_js(browser, "document.getElementById('subscriptions').textContent.includes('audit')")
    screenshot(browser, "topic")


def test_split_from_the_page_shows_two_children_within_two_seconds(
    browser: Any, standalone: StandaloneProcess, admin: AdminClient
) -> None:
    topic = "topic://public/default/split-here"
    admin.scalable_topics.create(topic, segments=1)
    admin.scalable_topics.set_auto_scale_policy(topic, {"enabled": False})
    _open(browser, standalone, "/console/topic/public/default/split-here")
    _live(browser)
    browser.find_element("css selector", "#dag g.seg[data-id='0']").click()
    browser.find_element("id", "split-mid").click()
    wait_js(browser, "document.getElementById('confirm').open", message="the confirmation")
    assert "Split segment #0 at its midpoint?" in browser.find_element("id", "confirm-title").text
    screenshot(browser, "split-confirmation")
    started = time.monotonic()
    browser.find_element("id", "confirm-ok").click()
    wait_js(
        browser,
        "document.querySelector(\"#dag g.seg.active[data-id='1']\") && "
        "document.querySelector(\"#dag g.seg.active[data-id='2']\") && "
        "!document.querySelector(\"#dag g.seg.active[data-id='0']\")",
        within=2.0,
        message="the two children of segment 0 in the DAG",
    )
    latency = time.monotonic() - started
    _record("split from the page -> children visible", f"{latency * 1000:.0f} ms")
    assert browser.execute_script("return window.braidConsole.loadMarker") == "kept"
    assert "Split #0 at its midpoint." in browser.find_element("id", "action-status").text
    screenshot(browser, "after-split")


def test_a_split_made_elsewhere_reaches_the_page_through_the_dag_watch(
    browser: Any, standalone: StandaloneProcess, admin: AdminClient
) -> None:
    topic = "topic://public/default/split-elsewhere"
    admin.scalable_topics.create(topic, segments=2)
    admin.scalable_topics.set_auto_scale_policy(topic, {"enabled": False})
    _open(browser, standalone, "/console/topic/public/default/split-elsewhere")
    _live(browser)
    updates = browser.execute_script("return window.braidConsole.dagUpdates || 0")
    started = time.monotonic()
    admin.scalable_topics.split(topic, 1, 0xC000)
    wait_js(
        browser,
        "document.querySelector(\"#dag g.seg.active[data-id='2']\") && "
        "document.querySelector(\"#dag g.seg.active[data-id='3']\")",
        within=2.0,
        message="the split pushed by the DAG watch",
    )
    _record("split over REST -> children visible", f"{(time.monotonic() - started) * 1000:.0f} ms")
    assert browser.execute_script("return window.braidConsole.dagUpdates") == updates + 1
    assert browser.execute_script("return window.braidConsole.loadMarker") == "kept"


def test_an_auto_scale_split_appears_with_its_reason(
    browser: Any, standalone: StandaloneProcess, admin: AdminClient
) -> None:
    topic = "topic://public/default/auto-split"
    admin.scalable_topics.create(topic, segments=1)
    _open(browser, standalone, "/console/topic/public/default/auto-split")
    _live(browser)
    # Two Stream consumers on one segment: the auto-scaler splits at once (consumer-driven).
    with braid.Client(standalone.service_url, operation_timeout=15) as client:
        first = client.subscribe_stream(topic, "workers", consumer_name="worker-1")
        second = client.subscribe_stream(topic, "workers", consumer_name="worker-2")
        try:
            item = wait_js(
                browser,
                "(() => { const li = document.querySelector('#timeline li.split[data-auto=\"1\"]');"
                " return li && li.textContent; })()",
                within=15.0,
                message="an auto-scale split in the timeline",
            )
            assert "Split #0 → #1, #2" in item
            assert "consumer-driven" in item and "'workers' has 2 consumers" in item
            wait_js(
                browser, "document.getElementById('subscriptions').textContent.includes('worker-2')"
            )
            not_taken = browser.find_element("id", "not-taken").text
            assert not_taken  # the evaluations that held back are listed (or the empty note)
            browser.execute_script("document.getElementById('dag-title').scrollIntoView()")
            screenshot(browser, "auto-split")
        finally:
            first.close()
            second.close()


def test_every_control_is_reachable_by_keyboard(
    browser: Any, standalone: StandaloneProcess, admin: AdminClient
) -> None:
    topic = "topic://public/default/keyboard"
    admin.scalable_topics.create(topic, segments=2)
    admin.scalable_topics.create_subscription(topic, "audit")
    for path in ("/console", "/console/topic/public/default/keyboard"):
        _open(browser, standalone, path)
        _live(browser)
        _tab_through(browser)
    # Within the DAG: arrows move between segments, Enter selects and shows the actions.
    browser.execute_script("document.querySelector('#dag g.seg[tabindex=\"0\"]').focus()")
    from selenium.webdriver.common.keys import Keys

    focused = browser.switch_to.active_element
    assert focused.get_attribute("data-id") == "0"
    focused.send_keys(Keys.ARROW_DOWN)
    focused = browser.switch_to.active_element
    assert focused.get_attribute("data-id") == "1"
    focused.send_keys(Keys.ENTER)
    wait_js(browser, "document.getElementById('split-mid')")
    _tab_through(browser)


def _tab_through(browser: Any) -> None:
    """Tab from the top of the page; every visible, enabled control must get the focus."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    controls = browser.execute_script(
        """
        const all = [...document.querySelectorAll(
          'a[href], button, input, select, textarea, summary, [tabindex="0"]')];
        const shown = all.filter(e => !e.disabled && e.getClientRects().length > 0 &&
          !e.closest('dialog:not([open])') && getComputedStyle(e).visibility !== 'hidden');
        shown.forEach((e, i) => e.dataset.kb = String(i));
        return shown.length;
        """
    )
    browser.execute_script(
        "document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0);"
    )
    browser.find_element("tag name", "body").click()
    reached: set[str] = set()
    for _ in range(controls + 15):
        ActionChains(browser).send_keys(Keys.TAB).perform()
        kb = browser.execute_script("return document.activeElement.dataset.kb || null")
        if kb is not None:
            reached.add(kb)
    missing = browser.execute_script(
        "return [...document.querySelectorAll('[data-kb]')].filter(e => !arguments[0]"
        ".includes(e.dataset.kb)).map(e => e.outerHTML.slice(0, 80));",
        sorted(reached),
    )
    assert not missing, f"not reachable with Tab: {missing}"


_CONTRAST_JS = (Path(__file__).parent / "contrast.js").read_text()


def test_text_contrast_is_at_least_4_5_to_1(
    browser: Any, standalone: StandaloneProcess, admin: AdminClient
) -> None:
    topic = "topic://public/default/contrast"
    admin.scalable_topics.create(topic, segments=2)
    admin.scalable_topics.split(topic, 1)
    admin.scalable_topics.create_subscription(topic, "audit")
    for path in ("/console", "/console/topic/public/default/contrast"):
        _open(browser, standalone, path)
        _live(browser)
        if "topic" in path:
            wait_js(
                browser,
                "document.querySelectorAll('#dag g.seg.draining, #dag g.seg.sealed').length",
            )
        assert browser.execute_script(_CONTRAST_JS) == []


def _thousand_segment_layout() -> SegmentLayout:
    """A DAG of 1,000 segments grown as a busy topic grows: 64 to start, then splits of the
    oldest active segments with a merge of two adjacent cold ones every tenth change."""
    now = 1_700_000_000_000
    layout = SegmentLayout.initial(64, now)
    change = 0
    while len(layout.segments) < 1000:
        change += 1
        now += 1000
        active = sorted(layout.active_segments, key=lambda s: s.hash_range.start)
        if change % 10 == 0 and len(layout.segments) <= 998:
            layout = layout.merge_segments([active[0].segment_id, active[1].segment_id], now)
            continue
        oldest = min((s for s in active if s.hash_range.size >= 2), key=lambda s: s.segment_id)
        layout = layout.split_segment(oldest.segment_id, now)
    return layout


def test_a_thousand_segment_dag_renders_in_under_a_second(
    browser: Any, standalone: StandaloneProcess, admin: AdminClient
) -> None:
    topic = "topic://public/default/thousand"
    admin.scalable_topics.create(topic, segments=1)
    admin.scalable_topics.set_auto_scale_policy(topic, {"enabled": False})
    _open(browser, standalone, "/console/topic/public/default/thousand")
    _live(browser)
    layout = _thousand_segment_layout()
    assert len(layout.segments) >= 1000
    document = layout_to_metadata(layout)
    elapsed = browser.execute_async_script(
        """
        const [doc, done] = arguments;
        const started = performance.now();
        window.braidConsole.topic.applyMetadata(doc);
        // Until the next frame is painted: layout and paint of the new SVG count too.
        requestAnimationFrame(() => setTimeout(() => done([performance.now() - started,
          window.braidConsole.topic.dag.lastRenderMs,
          document.querySelectorAll('#dag g.seg').length]), 0));
        """,
        document,
    )
    total_ms, svg_ms, boxes = elapsed
    _record(
        "1,000-segment DAG render",
        f"{total_ms:.0f} ms to a painted frame ({svg_ms:.0f} ms building the SVG), "
        f"{boxes} segments, epoch {layout.epoch}",
    )
    assert boxes == len(layout.segments)
    assert total_ms < 1000, f"rendering {boxes} segments took {total_ms:.0f} ms"
    # The page stays responsive: hovering a segment answers at once.
    started = time.monotonic()
    _hover(browser, "#dag g.seg.active rect")
    wait_js(browser, "!document.getElementById('tooltip').hidden", within=1.0)
    _record("1,000-segment DAG hover -> tooltip", f"{(time.monotonic() - started) * 1000:.0f} ms")
    screenshot(browser, "thousand-segments")
