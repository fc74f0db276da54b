"""Record classes: value types with the equality, hashing, ``repr`` and pickling of a dataclass.

Why not ``@dataclass``?  Building dataclasses at import time (they ``exec`` generated code, and
``dataclasses`` imports ``inspect``) was the largest cost of importing the compiler: removing them
cut ``import mind.compiler.frontend.api`` from about 36 ms to 12 ms.  Many small value classes
(dims, diagnostics, spec records, IR assumptions, AST nodes) then each carried the same
hand-written ``__eq__``/``__hash__``/``__repr__``/``__reduce__``; this module is the one place that
derives them from a class's declared fields instead.  It imports only ``operator``, so the spec
(the lowest layer) and everything above it can use it for free.

A subclass declares its fields, in constructor order, by ``_fields`` or, failing that, by its own
``__slots__`` (appended to the fields it inherits).  It writes its own ``__init__`` (constructors,
defaults and validation differ per class).  Then, as a dataclass would:

* ``a == b`` compares the field tuples when both are exactly the same class, else ``NotImplemented``;
* ``hash(a) == hash(tuple_of_fields)`` (set ``__hash__ = None`` for a mutable, unhashable record);
* ``repr(a)`` is ``ClassName(field=value, ...)`` over the fields;
* pickling calls the class with the field values, positionally.

``FrozenRecord`` also refuses assignment and deletion of attributes (``AttributeError``), so its
``__init__`` must set fields with ``object.__setattr__`` (or a slot descriptor's ``__set__``).
"""

from __future__ import annotations

from operator import attrgetter

TYPE_CHECKING = False  # ``typing.TYPE_CHECKING`` without importing ``typing``
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["Record", "FrozenRecord"]


def _no_fields(obj: object) -> tuple:
    return ()


def _field_getter(fields: tuple[str, ...]) -> Callable[[object], tuple]:
    """A fast C-level getter of the field tuple (``attrgetter`` returns a bare value for one name)."""
    if len(fields) > 1:
        return attrgetter(*fields)
    if fields:
        one = attrgetter(fields[0])
        return lambda obj: (one(obj),)
    return _no_fields


class Record:
    """Base of value classes whose ``==``, ``hash``, ``repr`` and pickling come from ``_fields``.

    No class here overrides the generic ``__eq__``/``__hash__`` with a hand-written one: measured,
    none is called while compiling examples/bench/large_network.mind, and a few hundred record
    hashes in a symbolic program cost about 40 ns more each than hand-written tuple code (some
    15 µs of a 6 ms compile).  Hand-write them in a subclass only where a measurement shows the
    generic ones cost more than about 2 µs on that benchmark.
    """

    __slots__ = ()
    #: The field names, in constructor order.
    _fields: tuple[str, ...] = ()
    # The per-class field-tuple getter (an ``attrgetter``, or a staticmethod), set by
    # ``__init_subclass__``; ``obj._field_values(obj)`` is the tuple of ``obj``'s fields.
    _field_values = staticmethod(_no_fields)

    def __init_subclass__(cls, **kwargs: object) -> None:
        """Fix ``_fields`` and build the field-tuple getter: an ``operator.attrgetter``, which is
        C code, so ``==`` and ``hash`` cost one call instead of a Python loop over the fields."""
        super().__init_subclass__(**kwargs)
        own = cls.__dict__
        if "_fields" in own:
            fields = tuple(own["_fields"])
        else:
            slots = own.get("__slots__", ())
            if isinstance(slots, str):
                slots = (slots,)
            fields = cls._fields + tuple(slots)
        cls._fields = fields
        getter = _field_getter(fields)
        cls._field_values = getter if isinstance(getter, attrgetter) else staticmethod(getter)

    def _values(self) -> tuple:
        """The tuple of this record's field values, in ``_fields`` order."""
        return self._field_values(self)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            get = self._field_values
            return get(self) == get(other)
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._field_values(self))

    def __repr__(self) -> str:
        args = ", ".join([f"{name}={getattr(self, name)!r}" for name in self._fields])
        return f"{type(self).__qualname__}({args})"

    def __reduce__(self) -> tuple:
        return (type(self), self._field_values(self))


class FrozenRecord(Record):
    """A ``Record`` that is immutable after ``__init__``, like ``@dataclass(frozen=True)``."""

    __slots__ = ()

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")
