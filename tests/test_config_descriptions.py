"""Every setting a user can give has a description (the text `rlvr` shows for it): defaults are the product, and an
undocumented key is one a user cannot find. Checked for every leaf field of every config model reachable from
RunConfig (a field holding a nested config is described by that config's own fields). A mutation run found
a description that no test read (task.phrasing)."""
from __future__ import annotations

import typing

from pydantic import BaseModel

from rlvr.config.run import RunConfig


def _models(model: type[BaseModel], seen: set[type[BaseModel]]) -> None:
    seen.add(model)
    for field in model.model_fields.values():
        for kind in (field.annotation, *typing.get_args(field.annotation)):
            if isinstance(kind, type) and issubclass(kind, BaseModel) and kind not in seen:
                _models(kind, seen)


def _is_section(annotation: object) -> bool:
    return any(isinstance(kind, type) and issubclass(kind, BaseModel)
               for kind in (annotation, *typing.get_args(annotation)))


def test_every_setting_has_a_description():
    models: set[type[BaseModel]] = set()
    _models(RunConfig, models)
    assert len(models) > 10  # the walk reached the nested sections (task, rollout, optimizer, ...)
    missing = [f"{model.__name__}.{name}" for model in models for name, field in model.model_fields.items()
               if not _is_section(field.annotation) and not (field.description or "").strip()]
    assert missing == []


def test_the_phrasing_setting_names_every_phrasing():
    from rlvr.config.run import TaskConfig
    description = TaskConfig.model_fields["phrasing"].description
    for phrasing in typing.get_args(TaskConfig.model_fields["phrasing"].annotation):
        assert phrasing in description
