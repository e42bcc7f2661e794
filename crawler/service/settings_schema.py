"""The API's pydantic models of the crawl settings, built from their one declaration.

``crawler.config`` declares the settings as ``SettingsModel``s (so the CLI does
not import pydantic); the API needs pydantic models to validate request bodies
strictly and to generate the OpenAPI document. ``pydantic_twin`` builds one from
the declaration: the same fields, defaults, bounds and validators, plus the
tighter limits a shared service sets on some fields.
"""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any, get_args, get_origin

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model

from crawler.settings_model import Setting, SettingsModel

STRICT = ConfigDict(extra="forbid", frozen=True, strict=True)


def pydantic_twin(
    declared: type[SettingsModel],
    *,
    name: str | None = None,
    overrides: dict[str, tuple[Any, Any]] | None = None,
    doc: str | None = None,
) -> type[BaseModel]:
    """A strict, frozen pydantic model with ``declared``'s fields; ``overrides``
    replace a field's type and ``Field(...)`` (its validators still run)."""
    overrides = overrides or {}
    unknown = sorted(set(overrides) - set(declared.model_fields))
    if unknown:  # a renamed setting would otherwise lose its service limit silently
        raise TypeError(f"{declared.__name__} has no field {unknown[0]!r} to override")
    fields: dict[str, Any] = {}
    for field_name, spec in declared.model_fields.items():
        annotation, info = overrides.get(field_name) or (_twin_type(spec.annotation), _field(spec))
        for validate in spec.validators:
            annotation = Annotated[annotation, AfterValidator(validate)]
        fields[field_name] = (annotation, info)
    model: type[BaseModel] = create_model(
        name or declared.__name__,
        __config__=STRICT,
        __doc__=doc or declared.__doc__,
        __module__=__name__,
        **fields,
    )
    return model


def _field(spec: Setting) -> Any:
    if spec.default_factory is not None:
        return Field(default_factory=spec.default_factory, ge=spec.ge, gt=spec.gt, le=spec.le)
    if spec.is_required():
        return Field(ge=spec.ge, gt=spec.gt, le=spec.le)
    return Field(default=spec.default, ge=spec.ge, gt=spec.gt, le=spec.le)


_TWINS: dict[type[SettingsModel], type[BaseModel]] = {}


def _twin_type(annotation: Any) -> Any:
    """``annotation`` with nested settings classes replaced by their pydantic twins."""
    if isinstance(annotation, type) and issubclass(annotation, SettingsModel):
        if annotation not in _TWINS:
            _TWINS[annotation] = pydantic_twin(annotation)
        return _TWINS[annotation]
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin is list:
        return list[_twin_type(args[0])]  # type: ignore[misc]  # built at run time
    if origin is dict:
        return dict[_twin_type(args[0]), _twin_type(args[1])]  # type: ignore[misc]
    if origin in (types.UnionType, typing.Union):
        return typing.Union[tuple(_twin_type(arg) for arg in args)]  # noqa: UP007  # built
    return annotation
