"""One contract for every memory store (SPEC 27): in memory, SQLite FTS5, PostgreSQL for real."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agentloop.errors import InvalidInput
from agentloop.memory import MemoryItem
from agentloop.memory._store import BaseMemoryStore, Write

from .conftest import StoreFactory

NS = ("user", "ada")


async def test_put_get_round_trips_an_item_in_utc(mstore: BaseMemoryStore) -> None:
    item = await mstore.put(NS, "Ada prefers tea", tags=["drink"])
    assert isinstance(item, MemoryItem)
    got = await mstore.get(NS, item.id)
    assert got is not None
    assert (got.id, got.namespace, got.text, got.tags) == (
        item.id,
        NS,
        "Ada prefers tea",
        ("drink",),
    )
    assert got.created_at.tzinfo is not None and got.created_at.utcoffset() == timedelta(0)
    assert got.score is None
    with pytest.raises(AttributeError):
        got.text = "x"  # type: ignore[misc]


async def test_a_put_with_an_existing_id_replaces_it_keeping_created_at(
    mstore: BaseMemoryStore,
) -> None:
    first = await mstore.put(NS, "old", id="pref")
    second = await mstore.put(NS, "new text", id="pref", tags=["t"])
    assert second.created_at == first.created_at and second.updated_at > first.updated_at
    assert await mstore.count(NS) == 1
    got = await mstore.get(NS, "pref")
    assert got is not None and got.text == "new text" and got.tags == ("t",)


async def test_put_many_writes_all_in_one_go_or_nothing(mstore: BaseMemoryStore) -> None:
    items = await mstore.put_many(NS, ["one", "two", "three"], tags=["x"])
    assert [i.text for i in items] == ["one", "two", "three"]
    assert await mstore.count(NS) == 3
    with pytest.raises(InvalidInput, match="text"):
        await mstore.put_many(NS, ["four", ""])
    assert await mstore.count(NS) == 3


async def test_namespaces_are_exact_never_a_prefix_s_children(mstore: BaseMemoryStore) -> None:
    child = await mstore.put((*NS, "work"), "the child's secret plan")
    await mstore.put(NS, "the parent's plan")
    assert [i.text for i in await mstore.search(NS, "plan")] == ["the parent's plan"]
    assert await mstore.get(NS, child.id) is None
    assert await mstore.count(NS) == 1
    assert await mstore.search(("user",), "plan") == []
    assert await mstore.namespaces() == [NS, (*NS, "work")]
    assert await mstore.namespaces(prefix=(*NS, "work")) == [(*NS, "work")]
    assert await mstore.namespaces(prefix=("user", "ad")) == []


async def test_delete_says_whether_there_was_an_item(mstore: BaseMemoryStore) -> None:
    item = await mstore.put(NS, "forget me")
    assert await mstore.delete(NS, item.id) is True
    assert await mstore.delete(NS, item.id) is False
    assert await mstore.get(NS, item.id) is None
    assert await mstore.search(NS, "forget") == []


async def test_search_matches_any_word_case_insensitively_more_words_first(
    mstore: BaseMemoryStore,
) -> None:
    await mstore.put(NS, "Ada likes green TEA in the morning")
    await mstore.put(NS, "coffee is for Tuesdays")
    await mstore.put(NS, "green tea and coffee")
    await mstore.put(NS, "nothing relevant here")
    found = await mstore.search(NS, "tea COFFEE", k=5)
    assert next(i.text for i in found) == "green tea and coffee"
    assert {i.text for i in found} == {
        "Ada likes green TEA in the morning",
        "coffee is for Tuesdays",
        "green tea and coffee",
    }
    assert all(i.score is not None for i in found)


async def test_ties_go_newest_first_and_an_empty_query_gives_the_k_newest(
    mstore: BaseMemoryStore,
) -> None:
    for n in range(7):
        await mstore.put(NS, f"note {n}")
    assert [i.text for i in await mstore.search(NS, "note", k=3)] == ["note 6", "note 5", "note 4"]
    newest = await mstore.search(NS, "", k=2)
    assert [i.text for i in newest] == ["note 6", "note 5"]
    assert all(i.score is None for i in newest)


@pytest.mark.parametrize(
    "query",
    ['"', "*", "tea*", "OR", "NEAR(", 'NEAR(tea coffee)', "tea OR", "a:b", "tea & !coffee",
     "'", "\\", "(tea | coffee)", "col:tea", "^tea", "-tea", "AND NOT"],
)  # fmt: skip
async def test_a_query_is_plain_words_never_index_syntax(
    mstore: BaseMemoryStore, query: str
) -> None:
    await mstore.put(NS, "tea or coffee near the door and not the window")
    found = await mstore.search(NS, query)
    assert isinstance(found, list)  # never a syntax error from FTS5 or tsquery


async def test_operator_words_are_words(mstore: BaseMemoryStore) -> None:
    await mstore.put(NS, "this OR that")
    await mstore.put(NS, "near the river")
    assert [i.text for i in await mstore.search(NS, "or")] == ["this OR that"]
    assert [i.text for i in await mstore.search(NS, "NEAR(")] == ["near the river"]
    assert await mstore.search(NS, "*") == []


async def test_filters_tags_held_all_and_updated_after(mstore: BaseMemoryStore) -> None:
    await mstore.put(NS, "a tea note", tags=["drink", "pref"])
    await mstore.put(NS, "b tea note", tags=["drink"])
    found = await mstore.search(NS, "tea", filter={"tags": ["drink", "pref"]})
    assert [i.text for i in found] == ["a tea note"]
    assert len(await mstore.search(NS, "", filter={"tags": ["drink"]})) == 2
    later = datetime.now(UTC) + timedelta(hours=1)
    assert await mstore.search(NS, "tea", filter={"updated_after": later}) == []
    earlier = datetime.now(UTC) - timedelta(hours=1)
    assert len(await mstore.search(NS, "tea", filter={"updated_after": earlier})) == 2


BAD_NAMESPACES: list[Any] = [
    (),
    ("",),
    ("a/b",),
    ("x" * 257,),
    tuple("abcdefghi"),
    "user",
    None,
    (1,),
    ["ok", 2],
]


@pytest.mark.parametrize("namespace", BAD_NAMESPACES)
async def test_a_bad_namespace_is_invalid_input_and_nothing_is_written(
    mstore: BaseMemoryStore, namespace: Any
) -> None:
    with pytest.raises(InvalidInput, match="namespace"):
        await mstore.put(namespace, "text")
    with pytest.raises(InvalidInput, match="namespace"):
        await mstore.search(namespace, "text")
    with pytest.raises(InvalidInput, match="namespace"):
        await mstore.get(namespace, "id")
    assert await mstore.namespaces() == []


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda s: s.put(NS, ""), "text"),
        (lambda s: s.put(NS, "   "), "text"),
        (lambda s: s.put(NS, "ok", tags="drink"), "tags"),
        (lambda s: s.put(NS, "ok", id=""), "id"),
        (lambda s: s.search(NS, "x", k=0), "k"),
        (lambda s: s.search(NS, "x", k=101), "k"),
        (lambda s: s.search(NS, "x", k=True), "k"),
        (lambda s: s.search(NS, "x", filter={"tag": ["a"]}), "filter"),
        (lambda s: s.search(NS, "x", filter={"updated_after": "yesterday"}), "updated_after"),
        (lambda s: s.search(NS, 3), "query"),
    ],
)
async def test_bad_arguments_are_invalid_input_naming_them(
    mstore: BaseMemoryStore, call: Any, argument: str
) -> None:
    with pytest.raises(InvalidInput, match=argument):
        await call(mstore)
    assert await mstore.count(NS) == 0


async def test_k_bounds_the_results(mstore: BaseMemoryStore) -> None:
    await mstore.put_many(NS, [f"tea {n}" for n in range(12)])
    assert len(await mstore.search(NS, "tea", k=100)) == 12
    assert len(await mstore.search(NS, "tea", k=1)) == 1


async def test_items_survive_a_reopen(open_memory: StoreFactory) -> None:
    store = open_memory()
    item = await store.put(NS, "durable fact", tags=["t"])
    again = open_memory()
    got = await again.get(NS, item.id)
    assert got is not None and got.text == "durable fact" and got.created_at == item.created_at


async def test_apply_is_one_transaction_with_the_item_limit_enforced(
    mstore: BaseMemoryStore,
) -> None:
    await mstore.put(NS, "kept", id="a")
    await mstore.put(NS, "gone", id="b")
    writes = [
        Write("c", "third"),
        Write("b"),  # a delete frees room
        Write("d", "fourth"),
        Write("e", "fifth: over the limit"),
        Write("a", "kept, replaced"),  # an existing id takes no room
    ]
    applied = await mstore.apply(NS, writes, max_items=3)
    assert applied.written == ("c", "d", "a")
    assert applied.deleted == ("b",)
    assert applied.dropped == ("e",)
    assert sorted(i.id for i in await mstore.search(NS, "", k=10)) == ["a", "c", "d"]


async def test_apply_keeps_a_rename_s_created_at(mstore: BaseMemoryStore) -> None:
    old = await mstore.put(NS, "file body", id="/memories/a.md")
    kept = old.created_at.timestamp()
    await mstore.apply(
        NS, [Write("/memories/b.md", "file body", (), kept), Write("/memories/a.md")]
    )
    moved = await mstore.get(NS, "/memories/b.md")
    assert moved is not None and abs(moved.created_at.timestamp() - kept) < 1e-5
    assert await mstore.get(NS, "/memories/a.md") is None


def test_a_sqlite_without_fts5_is_a_configuration_error_at_construction(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sqlite3

    from agentloop.errors import ConfigurationError
    from agentloop.memory import SQLiteMemoryStore

    real = sqlite3.connect

    class NoFTS5(sqlite3.Connection):
        def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
            if "USING fts5" in sql:
                raise sqlite3.OperationalError("no such module: fts5")
            return super().execute(sql, *args)

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        return real(*args, **kwargs, factory=NoFTS5)

    monkeypatch.setattr(sqlite3, "connect", connect)
    with pytest.raises(ConfigurationError, match="FTS5"):
        SQLiteMemoryStore(tmp_path / "m.db")
