"""CoreAttr: a read-only attribute of a Python class that hands on one of the wrapped C++
object's (``self._core``), typed and documented where the class declares it."""

from __future__ import annotations

from typing import Any, Generic, Optional, TypeVar, overload

T = TypeVar("T")


class CoreAttr(Generic[T]):
    """``name = CoreAttr[str]("name", "doc")`` in a class body: reading ``obj.name`` returns
    ``obj._core.<core_name>`` (read-only, like a property)."""

    def __init__(self, core_name: str, doc: str) -> None:
        self._core_name = core_name
        self.__doc__ = doc

    @overload
    def __get__(self, obj: None, owner: Optional[type] = None) -> "CoreAttr[T]": ...

    @overload
    def __get__(self, obj: object, owner: Optional[type] = None) -> T: ...

    def __get__(self, obj: Any, owner: Optional[type] = None) -> Any:
        if obj is None:
            return self
        return getattr(obj._core, self._core_name)

    def __set__(self, obj: Any, value: Any) -> None:
        raise AttributeError(f"{self._core_name} is read-only")
