"""Layout reads through :class:`ScalableTopicResources` on a real SQLite metadata store: a layout
read again unchanged is the one decoded before (no second decode), and every change, a deleted
and re-created topic, or a corrupt document is read as the store holds it."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from braid.core.layout import SegmentLayout
from braid.core.names import TopicName
from braid.core.segment_info import CorruptLayout
from braid.metadata.sqlite import SqliteMetadataStore
from braid.scalable import resources
from braid.scalable.resources import ScalableTopicResources

TOPIC = TopicName.parse("topic://public/default/layout-reads")


async def test_an_unchanged_layout_is_decoded_once_and_every_change_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    decoded: list[bytes] = []
    real = resources.decode_layout
    ours = threading.get_ident()

    def counted(data: bytes) -> SegmentLayout:
        # Only this test's decodes: a session-scoped broker of another test module runs in a
        # thread of its own and reads its topics' layouts through the same module function.
        if threading.get_ident() == ours:
            decoded.append(data)
        return real(data)

    monkeypatch.setattr(resources, "decode_layout", counted)
    store = await SqliteMetadataStore.open(str(tmp_path / "meta.db"))
    try:
        res = ScalableTopicResources(store)
        await res.create_layout(TOPIC, SegmentLayout.initial(2))
        first = await res.require_layout(TOPIC)
        again = await res.require_layout(TOPIC)
        assert again.layout is first.layout and len(decoded) == 1
        split = await res.update_layout(TOPIC, lambda layout: layout.split_segment(0))
        after = await res.require_layout(TOPIC)
        assert after.layout == split.layout and after.version == split.version
        assert len(after.layout.segments) == 4 and len(decoded) == 2
        await res.delete_topic(TOPIC)
        assert await res.get_layout(TOPIC) is None
        await res.create_layout(TOPIC, SegmentLayout.initial(3))
        assert len((await res.require_layout(TOPIC)).layout.active_segments) == 3
        await store.put(res.topic_path(TOPIC), b"{not a layout")
        with pytest.raises(CorruptLayout):
            await res.require_layout(TOPIC)
    finally:
        await store.close()
