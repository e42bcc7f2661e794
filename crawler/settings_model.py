"""Settings classes declared once by their annotations, validated without pydantic.

Every command that crawls reads and validates its settings at start-up, and
importing pydantic and building its schemas was the largest part of a one-page
check's start-up. These classes keep the part of pydantic's model API the code
uses (``model_validate``, ``model_dump``, ``model_copy``, ``model_fields``),
its lax conversions of config-file and environment values (``"3"`` for a
number, ``"yes"`` for a flag) and its error wording; the service builds its
strict pydantic models for the API from the same declarations
(``crawler.service.settings_schema``), so a setting is still declared once.
"""

from __future__ import annotations

import operator
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal, Self, dataclass_transform, get_args, get_origin

Convert = Callable[[Any, tuple[str | int, ...]], Any]
Validator = Callable[[Any], Any]
_MISSING: Any = object()
_TRUE = frozenset({"1", "on", "t", "true", "y", "yes"})
_FALSE = frozenset({"0", "off", "f", "false", "n", "no"})
_INTEGER = "Input should be a valid integer"


class SettingsError(ValueError):
    """A value that does not fit its declaration; ``loc`` names the field (and the
    key or index inside it), ``message`` says why in pydantic's words."""

    def __init__(self, loc: tuple[str | int, ...], message: str) -> None:
        super().__init__(f"{'.'.join(str(part) for part in loc) or 'settings'}: {message}")
        self.loc = loc
        self.message = message


@dataclass(frozen=True, slots=True)
class Setting:
    """One field's declaration: its default and its bounds (pydantic's ``Field``)."""

    default: Any = _MISSING
    default_factory: Callable[[], Any] | None = None
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    annotation: Any = None
    validators: tuple[Validator, ...] = field(default=())

    def get_default(self, *, call_default_factory: bool = False) -> Any:
        """The default value (a fresh one from the factory when asked)."""
        if self.default_factory is not None:
            return self.default_factory() if call_default_factory else self.default_factory
        return None if self.default is _MISSING else self.default

    def is_required(self) -> bool:
        return self.default is _MISSING and self.default_factory is None


def setting(
    default: Any = _MISSING,
    *,
    default_factory: Callable[[], Any] | None = None,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
) -> Any:
    """A field with bounds or a default factory (typed ``Any`` so it fits any annotation)."""
    return Setting(default, default_factory, ge, gt, le)


def validates(*names: str) -> Callable[[Validator], Any]:
    """Run the decorated function on these fields' converted values; it returns the
    value to keep or raises ValueError (pydantic's ``field_validator``, mode "after")."""

    def mark(function: Validator) -> Any:
        method = staticmethod(function)
        method.__dict__["validates"] = names
        return method

    return mark


@dataclass_transform(kw_only_default=True, frozen_default=True, field_specifiers=(setting,))
class SettingsModel:
    """Frozen settings: keyword construction validates, unknown keys are refused.

    ``dataclass_transform`` lets mypy check the keywords a subclass is built with."""

    model_fields: ClassVar[dict[str, Setting]] = {}
    _converters: ClassVar[dict[str, Convert]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        hints = typing.get_type_hints(cls)
        own_validators: dict[str, list[Validator]] = {}
        for value in vars(cls).values():
            if isinstance(value, staticmethod) and "validates" in value.__dict__:
                for name in value.__dict__["validates"]:
                    own_validators.setdefault(name, []).append(value.__func__)
        fields = dict(cls.model_fields)
        for name in cls.__annotations__:
            hint = hints[name]
            if get_origin(hint) is ClassVar or name.startswith("_"):
                continue
            declared = vars(cls).get(name, _MISSING)
            spec = declared if isinstance(declared, Setting) else Setting(default=declared)
            fields[name] = replace(spec, annotation=hint)
        for name, validators in own_validators.items():
            if name not in fields:
                raise TypeError(f"{cls.__name__}: a validator names unknown field {name!r}")
            fields[name] = replace(fields[name], validators=(*fields[name].validators, *validators))
        cls.model_fields = fields
        cls._converters = {name: _checked(spec) for name, spec in fields.items()}
        for name in fields:  # a Setting left as a class attribute would mislead a reader
            if isinstance(vars(cls).get(name), Setting):
                delattr(cls, name)

    def __init__(self, **values: Any) -> None:
        for name in values:
            if name not in self._converters:
                raise SettingsError((name,), "Extra inputs are not permitted")
        for name, convert in self._converters.items():
            if name in values:
                value = convert(values[name], (name,))
            else:
                spec = self.model_fields[name]
                if spec.is_required():
                    raise SettingsError((name,), "Field required")
                value = spec.get_default(call_default_factory=True)
            object.__setattr__(self, name, value)

    @classmethod
    def model_validate(cls, values: Mapping[str, Any] | Self) -> Self:
        """An instance from a mapping (or the instance itself)."""
        if isinstance(values, cls):
            return values
        if not isinstance(values, Mapping):
            raise SettingsError((), "Input should be a valid dictionary or instance")
        return cls(**{str(key): value for key, value in values.items()})

    def model_dump(self, *, mode: str = "python") -> dict[str, Any]:
        """The values as plain data (nested settings as dicts, lists copied)."""
        del mode  # every value is JSON-compatible already
        return {name: _dumped(getattr(self, name)) for name in self.model_fields}

    def model_copy(self, *, update: Mapping[str, Any] | None = None) -> Self:
        """A copy with some values replaced, unvalidated (as pydantic's)."""
        copy = object.__new__(type(self))
        copy.__dict__.update(self.__dict__)
        for name, value in (update or {}).items():
            if name not in self.model_fields:
                raise SettingsError((name,), "Extra inputs are not permitted")
            copy.__dict__[name] = value
        return copy

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: {name} cannot be set")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: {name} cannot be deleted")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.__dict__ == other.__dict__

    __hash__ = None  # type: ignore[assignment]  # lists inside: unhashable, as pydantic's

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.model_fields)
        return f"{type(self).__name__}({inner})"


def _dumped(value: Any) -> Any:
    if isinstance(value, SettingsModel):
        return value.model_dump()
    if isinstance(value, list):
        return [_dumped(item) for item in value]
    if isinstance(value, dict):
        return {key: _dumped(item) for key, item in value.items()}
    return value


def _checked(spec: Setting) -> Convert:
    """The field's converter: type, then bounds, then its validators."""
    convert = converter(spec.annotation)
    bounds = [
        (limit, test, words)
        for limit, test, words in (
            (spec.ge, operator.ge, "greater than or equal to"),
            (spec.gt, operator.gt, "greater than"),
            (spec.le, operator.le, "less than or equal to"),
        )
        if limit is not None
    ]
    validators = spec.validators
    if not bounds and not validators:
        return convert

    def checked(value: Any, loc: tuple[str | int, ...]) -> Any:
        value = convert(value, loc)
        for limit, test, words in bounds:
            if value is not None and not test(value, limit):
                raise SettingsError(loc, f"Input should be {words} {_number(limit)}")
        for validate in validators:
            try:
                value = validate(value)
            except SettingsError:
                raise
            except ValueError as exc:
                raise SettingsError(loc, f"Value error, {exc}") from exc
        return value

    return checked


def _number(limit: float) -> str:
    return str(int(limit)) if float(limit).is_integer() else str(limit)


def converter(annotation: Any) -> Convert:
    """Check and convert a value to ``annotation``, leniently as pydantic's lax mode."""
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin in (types.UnionType, typing.Union):
        kinds = [arg for arg in args if arg is not type(None)]
        if len(kinds) != 1 or len(args) != 2:
            raise TypeError(f"unsupported union {annotation!r}")
        inner = converter(kinds[0])
        return lambda value, loc: None if value is None else inner(value, loc)
    if origin is Literal:
        return _literal(args)
    if origin is list:
        return _list(converter(args[0]))
    if origin is dict:
        return _dict(converter(args[0]), converter(args[1]))
    if isinstance(annotation, type) and issubclass(annotation, SettingsModel):
        return _nested(annotation)
    simple = _SIMPLE.get(annotation)
    if simple is None:
        raise TypeError(f"unsupported setting type {annotation!r}")
    return simple


def _literal(choices: tuple[Any, ...]) -> Convert:
    words = [repr(choice) for choice in choices]
    listed = words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"

    def literal(value: Any, loc: tuple[str | int, ...]) -> Any:
        for choice in choices:
            if type(value) is type(choice) and value == choice:
                return value
        raise SettingsError(loc, f"Input should be {listed}")

    return literal


def _list(item: Convert) -> Convert:
    def listed(value: Any, loc: tuple[str | int, ...]) -> list[Any]:
        if not isinstance(value, list | tuple | set | frozenset):
            raise SettingsError(loc, "Input should be a valid list")
        return [item(entry, (*loc, index)) for index, entry in enumerate(value)]

    return listed


def _dict(key: Convert, item: Convert) -> Convert:
    def mapped(value: Any, loc: tuple[str | int, ...]) -> dict[Any, Any]:
        if not isinstance(value, Mapping):
            raise SettingsError(loc, "Input should be a valid dictionary")
        return {key(k, (*loc, str(k))): item(v, (*loc, str(k))) for k, v in value.items()}

    return mapped


def _nested(model: type[SettingsModel]) -> Convert:
    def nested(value: Any, loc: tuple[str | int, ...]) -> SettingsModel:
        if isinstance(value, model):
            return value
        if not isinstance(value, Mapping):
            expected = f"a valid dictionary or instance of {model.__name__}"
            raise SettingsError(loc, f"Input should be {expected}")
        try:
            return model.model_validate(value)
        except SettingsError as exc:
            raise SettingsError((*loc, *exc.loc), exc.message) from None

    return nested


def _to_str(value: Any, loc: tuple[str | int, ...]) -> str:
    if not isinstance(value, str):
        raise SettingsError(loc, "Input should be a valid string")
    if "\x00" in value:  # settings are stored with the crawl: PostgreSQL keeps no NUL in a text
        raise SettingsError(loc, "NUL characters are not allowed")
    return value


def _to_bool(value: Any, loc: tuple[str | int, ...]) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
    raise SettingsError(loc, "Input should be a valid boolean, unable to interpret input")


def _to_int(value: Any, loc: tuple[str | int, ...]) -> int:
    if isinstance(value, bool):
        raise SettingsError(loc, _INTEGER)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if value.is_integer():
            return int(value)
        raise SettingsError(loc, f"{_INTEGER}, got a number with a fractional part")
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            pass
        try:
            number = float(text)
        except ValueError:
            number = float("nan")
        if number.is_integer():
            return int(number)
        raise SettingsError(loc, f"{_INTEGER}, unable to parse string as an integer")
    raise SettingsError(loc, _INTEGER)


def _to_float(value: Any, loc: tuple[str | int, ...]) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            raise SettingsError(
                loc, "Input should be a valid number, unable to parse string as a number"
            ) from None
    raise SettingsError(loc, "Input should be a valid number")


def _any(value: Any, loc: tuple[str | int, ...]) -> Any:
    del loc
    return value


_SIMPLE: dict[Any, Convert] = {
    str: _to_str,
    bool: _to_bool,
    int: _to_int,
    float: _to_float,
    Any: _any,
}
