"""``record``: behaves as ``@dataclass(frozen=True, slots=True)`` does, checked against one."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
import typing
from typing import Any, ClassVar

import pydantic
import pytest

from agentloop._util.slots import fast_init, record


@record
class Point:
    """A point."""

    x: int
    y: int = 0
    tags: tuple[str, ...] = dataclasses.field(default_factory=tuple, repr=False)
    note: str = dataclasses.field(default="", compare=False)
    scale: float = dataclasses.field(default=1.0, kw_only=True)
    seen: list[int] = dataclasses.field(default_factory=list, init=False, compare=False)
    KIND: ClassVar[str] = "point"


@dataclasses.dataclass(frozen=True, slots=True)
class DataPoint:
    """A point."""

    x: int
    y: int = 0
    tags: tuple[str, ...] = dataclasses.field(default_factory=tuple, repr=False)
    note: str = dataclasses.field(default="", compare=False)
    scale: float = dataclasses.field(default=1.0, kw_only=True)
    seen: list[int] = dataclasses.field(default_factory=list, init=False, compare=False)
    KIND: ClassVar[str] = "point"


@record
class Base:
    a: int


@record
class Child(Base):
    b: str = "b"


@record
class Checked:
    """Checked in ``__post_init__``."""

    n: int
    doubled: int = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        if self.n < 0:
            raise ValueError("negative")
        object.__setattr__(self, "doubled", self.n * 2)


@record(frozen=False)
class Mutable:
    items: list[int] = dataclasses.field(default_factory=list)
    name: str = ""


def test_the_signature_defaults_and_doc_are_the_dataclasses() -> None:
    assert str(inspect.signature(Point)) == str(inspect.signature(DataPoint))
    assert Point.__match_args__ == DataPoint.__match_args__ == ("x", "y", "tags", "note")
    made = Point(1, note="n", scale=2.0)
    assert (made.x, made.y, made.tags, made.note, made.scale, made.seen) == (1, 0, (), "n", 2.0, [])
    assert Point(1).seen is not Point(1).seen  # a fresh list from the factory each time
    assert Point.__init__.__qualname__ == "Point.__init__"
    assert typing.get_type_hints(Point.__init__) == typing.get_type_hints(DataPoint.__init__)
    params = vars(Point)["__dataclass_params__"]
    assert params.frozen and params.eq and not params.order
    assert [f.name for f in dataclasses.fields(Point)] == [
        f.name for f in dataclasses.fields(DataPoint)
    ]
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'x'"):
        Point()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="positional"):
        Point(1, 2, (), "", 3.0)  # type: ignore[call-arg]
    assert dataclasses.is_dataclass(Point)


def test_a_class_without_a_docstring_gets_the_dataclasses_doc() -> None:
    body = {"__annotations__": {"a": "int", "b": "str"}, "b": "x", "__module__": __name__}
    made: type = record(type("NoDoc", (), dict(body)))
    plain: type = dataclasses.dataclass(frozen=True, slots=True)(type("NoDoc", (), dict(body)))
    assert made.__doc__ == plain.__doc__ == "NoDoc(a: 'int', b: 'str' = 'x')"


def test_assignment_and_deletion_raise_frozen_instance_error() -> None:
    point = Point(1)
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'x'"):
        point.x = 2  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete field 'y'"):
        del point.y
    with pytest.raises(dataclasses.FrozenInstanceError):
        point.other = 1  # type: ignore[attr-defined]
    assert not hasattr(point, "__dict__")


def test_repr_equality_and_hash_are_the_dataclasses() -> None:
    pairs = [
        (Point(1), DataPoint(1)),
        (Point(1, 2, ("t",), "n", scale=3.0), DataPoint(1, 2, ("t",), "n", scale=3.0)),
    ]
    for mine, theirs in pairs:
        assert repr(mine).replace("Point", "DataPoint", 1) == repr(theirs)
        assert hash(mine) == hash(theirs)
    assert Point(1, note="a") == Point(1, note="b")  # compare=False
    assert Point(1) != Point(2)
    assert Point(1) != DataPoint(1)  # type: ignore[comparison-overlap]  # NotImplemented both ways
    assert Point(1).__eq__(object()) is NotImplemented
    assert len({Point(1), Point(1, note="x"), Point(2)}) == 2


def test_repr_of_a_record_holding_itself_does_not_recurse() -> None:
    box = Mutable()
    box.items.append(box)  # type: ignore[arg-type]
    assert repr(box) == "Mutable(items=[...], name='')"


def test_a_nan_field_equals_itself_as_in_a_tuple() -> None:
    nan = float("nan")
    assert Base(nan) == Base(nan)  # type: ignore[arg-type]


def test_eq_false_and_repr_false_keep_objects_own() -> None:
    @record(eq=False, repr=False)
    class Plain:
        a: int

    one = Plain(1)
    assert one != Plain(1) and one == one
    assert repr(one).startswith("<") and hash(one) == object.__hash__(one)


def test_methods_the_class_defines_are_kept() -> None:
    @record
    class Own:
        a: int

        def __repr__(self) -> str:
            return "own"

        def __eq__(self, other: object) -> bool:
            return True

    assert repr(Own(1)) == "own" and Own(1) == Own(2)
    assert hash(Own(1)) == hash((1,))  # __eq__ alone: the dataclass still adds __hash__

    @record
    class OwnHash:
        a: int

        def __hash__(self) -> int:
            return 7

    assert hash(OwnHash(1)) == 7


def test_a_setattr_in_the_body_is_refused_as_the_dataclass_does() -> None:
    with pytest.raises(TypeError, match="Cannot overwrite attribute __setattr__"):

        @record
        class Bad:
            a: int

            def __setattr__(self, name: str, value: Any) -> None: ...


def test_replace_pickle_copy_and_deepcopy() -> None:
    point = Point(1, 2, ("t",), note="n", scale=2.0)
    assert dataclasses.replace(point, y=5) == Point(1, 5, ("t",), scale=2.0)
    assert dataclasses.replace(point, y=5).note == "n"
    for again in (
        pickle.loads(pickle.dumps(point)),
        copy.copy(point),
        copy.deepcopy(point),
    ):
        assert type(again) is Point and again == point and again.note == "n"
        assert again.seen == []
    assert point.__getstate__() == DataPoint(1, 2, ("t",), "n", scale=2.0).__getstate__()
    child = pickle.loads(pickle.dumps(Child(1, "z")))
    assert child == Child(1, "z")


def test_post_init_runs_after_every_field_is_set() -> None:
    assert Checked(3).doubled == 6
    with pytest.raises(ValueError, match="negative"):
        Checked(-1)
    assert dataclasses.replace(Checked(2), n=4).doubled == 8
    assert pickle.loads(pickle.dumps(Checked(5))).doubled == 10


def test_kw_only_for_the_whole_class() -> None:
    @record(kw_only=True)
    class Options:
        a: int
        b: int = 2

    assert Options(a=1).b == 2
    with pytest.raises(TypeError):
        Options(1)  # type: ignore[call-arg]
    assert str(inspect.signature(Options)) == "(*, a: 'int', b: 'int' = 2) -> None"


def test_a_non_default_field_after_a_default_one_is_refused() -> None:
    with pytest.raises(TypeError, match="non-default argument 'b' follows default argument"):

        @record
        class Wrong:
            a: int = 1
            b: int  # type: ignore[misc]


def test_inheritance_between_records() -> None:
    child = Child(1)
    assert (child.a, child.b) == (1, "b") and repr(child) == "Child(a=1, b='b')"
    assert child != Base(1) and Base(1) == Base(1)
    assert [f.name for f in dataclasses.fields(Child)] == ["a", "b"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        child.a = 2  # type: ignore[misc]


def test_a_frozen_dataclass_may_subclass_a_record_and_the_other_way() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Sub(Base):
        c: int = 3

    assert (
        Sub(1) == Sub(1)
        and repr(Sub(1))
        == "test_a_frozen_dataclass_may_subclass_a_record_and_the_other_way.<locals>.Sub(a=1, c=3)"
    )

    @record
    class Over(DataPoint):
        extra: int = 0

    over = Over(1, extra=2)
    assert (over.x, over.extra, over.scale) == (1, 2, 1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        over.extra = 3  # type: ignore[misc]


def test_a_record_refuses_a_non_frozen_dataclass_base_and_the_other_way() -> None:
    @dataclasses.dataclass
    class Loose:
        a: int

    with pytest.raises(TypeError, match="cannot inherit frozen dataclass from a non-frozen one"):

        @record
        class Tight(Loose):  # type: ignore[misc]
            b: int

    with pytest.raises(TypeError, match="cannot inherit non-frozen dataclass from a frozen one"):

        @dataclasses.dataclass
        class Looser(Base):  # type: ignore[misc]
            b: int


def test_a_mutable_record() -> None:
    box = Mutable([1])
    box.name = "n"
    box.items.append(2)
    assert box == Mutable([1, 2], "n") and Mutable.__hash__ is None
    assert not Mutable.__dataclass_params__.frozen
    assert pickle.loads(pickle.dumps(box)) == box and copy.deepcopy(box) == box
    assert Mutable().items is not Mutable().items


def test_pydantic_validates_a_record_as_a_dataclass() -> None:
    adapter = pydantic.TypeAdapter(Child)
    assert adapter.validate_python({"a": 1}) == Child(1)
    assert adapter.dump_python(Child(1, "z")) == {"a": 1, "b": "z"}
    with pytest.raises(pydantic.ValidationError):
        adapter.validate_python({"a": "x"})


def test_fast_init_gives_a_dataclass_the_same_init() -> None:
    @fast_init
    @dataclasses.dataclass(frozen=True, slots=True)
    class Event:
        kind: str
        text: str = ""

    assert Event("a") == Event("a", "") and Event("a", text="b").text == "b"
    with pytest.raises(dataclasses.FrozenInstanceError):
        Event("a").kind = "b"  # type: ignore[misc]


def test_records_of_one_shape_share_one_compiled_code() -> None:
    @record
    class One:
        left: int
        right: str = ""

    @record
    class Two:
        up: float
        down: bytes = b""

    assert One.__init__.__code__.co_code == Two.__init__.__code__.co_code
    assert One.__init__.__code__.co_varnames == ("self", "left", "right")
    assert Two(1.0).down == b"" and One(2, right="r").right == "r"
    assert One(1) == One(1) and One(1) != One(2)  # == compiles on its first call
    assert {"left", "right"} <= set(One.__eq__.__code__.co_names)
    assert hash(Two(1.0)) == hash((1.0, b"")) and Two(1.0) == Two(1.0)
    assert One.__eq__.__code__.co_code == Two.__eq__.__code__.co_code
