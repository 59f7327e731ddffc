"""`rlvr config [SECTION]`: every key of the typed config with its type, default and description,
read from the pydantic models themselves; a section filter; one error for an unknown section; and every command that
takes dotted.key=value overrides points to it from its --help."""
from __future__ import annotations

import re

import pytest
from pydantic import BaseModel

from rlvr.cli.config import config_rows, value_text
from rlvr.cli.main import main
from rlvr.config.model import ModelConfig
from rlvr.config.run import RolloutConfig, RunConfig, load_config, parse_overrides
from rlvr.config.sections import CheckpointConfig


def listing(capsys, *args: str) -> dict[str, tuple[str, str, str]]:
    """{key: (type, default, description)} of the command's table, its header checked and dropped."""
    assert main(["config", *args]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert re.split(r"\s{2,}", lines[0]) == ["KEY", "TYPE", "DEFAULT", "DESCRIPTION"]
    rows = {}
    for line in lines[1:]:
        key, kind, default, description = re.split(r"\s{2,}", line, maxsplit=3)
        rows[key] = (kind, default, description)
    return rows


def leaf_keys(model: type[BaseModel], prefix: str = "") -> list[str]:
    """The test's own walk of the config: every settable dotted key."""
    keys = []
    for name, field in model.model_fields.items():
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            keys += leaf_keys(field.annotation, f"{prefix}{name}.")
        else:
            keys.append(f"{prefix}{name}")
    return keys


def test_every_key_is_listed_once_in_declaration_order(capsys):
    rows = listing(capsys)
    # mutation caught: not descending into nested sections (rollout.dynamic_sampling.*, model.lora.*, logging.wandb.*)
    assert list(rows) == leaf_keys(RunConfig)
    assert all(description for _, _, description in rows.values())


def test_defaults_types_and_descriptions_come_from_the_models(capsys):
    rows = listing(capsys)
    field = RolloutConfig.model_fields["max_new_tokens"]
    assert rows["rollout.max_new_tokens"] == ("int >= 1", str(field.default), field.description)
    save_final = CheckpointConfig.model_fields["save_final"].default
    assert rows["checkpoint.save_final"][:2] == ("{full,model,none}", save_final)
    # the declared default, not what validation makes of it: model.dtype=auto resolves to float32 on a CPU (mutation
    # caught: listing RunConfig().model_dump())
    assert rows["model.dtype"][1] == ModelConfig.model_fields["dtype"].default == "auto"
    assert rows["rollout.dynamic_sampling.enabled"][:2] == ("bool | {auto}", "auto")
    # YAML spellings, as an override takes them; factories are called
    assert rows["eval.ks"][:2] == ("list[int]", "[1, 4]")
    assert rows["output_dir"][:2] == ("str | null", "null")
    assert rows["max_minutes"][0] == "float > 0 | null"  # the bound is the number's, not null's
    assert rows["group_view"][1] == "true"
    assert rows["optimizer.lr"][1] == repr(RunConfig.model_fields["optimizer"].default_factory().lr)


def test_a_section_lists_its_keys_and_its_nested_sections(capsys):
    rollout = listing(capsys, "rollout")
    assert list(rollout) == [k for k in leaf_keys(RunConfig) if k.startswith("rollout.")]
    assert "rollout.dynamic_sampling.enabled" in rollout and "rollout.engine.kind" in rollout
    assert list(listing(capsys, "rollout.dynamic_sampling")) == ["rollout.dynamic_sampling.enabled",
                                                                 "rollout.dynamic_sampling.max_extra_prompts"]
    assert list(listing(capsys, "max_steps")) == ["max_steps"]  # a key alone
    # mutation caught: prefix matching without the dot (section "sample" would also list the key samples_per_step)
    sample = listing(capsys, "sample")
    assert "sample.samples" in sample and all(key.startswith("sample.") for key in sample)


def test_an_unknown_section_is_one_error_listing_the_sections(capsys):
    assert main(["config", "rollot"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith("rlvr: error: unknown config section 'rollot' (did you mean 'rollout'?); sections: ")
    for section in ("model", "model.lora", "rollout.dynamic_sampling", "checkpoint", "logging.wandb"):
        assert f" {section}," in captured.err or f" {section} " in captured.err


@pytest.mark.parametrize("command, points", [("train", True), ("sft", True), ("eval", True), ("sample", True),
                                             ("recipe", True), ("verify", True), ("report", False)])
def test_commands_with_overrides_point_to_rlvr_config(capsys, command, points):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert ("`rlvr config [SECTION]`" in text) == points  # report takes no key=value: no pointer


def test_table_caps_the_type_and_default_columns():
    from rlvr.cli.config import KeyRow, table

    rows = [KeyRow("a.b", "int", "x" * 20, "what it does"), KeyRow("c", "t" * 30, "1", "other")]
    header, first, second = table(rows).splitlines()
    # widths: key max(3, 3, 1) = 3; type min(24, 30) = 24; default min(16, 20) = 16; two spaces between columns
    assert header == "KEY" + "  " + "TYPE".ljust(24) + "  " + "DEFAULT".ljust(16) + "  " + "DESCRIPTION"
    assert first == "a.b  " + "int".ljust(24) + "  " + "x" * 20 + "  what it does"  # a long default pushes right
    assert second == "c  " + "  " + "t" * 30 + "  " + "1".ljust(16) + "  other"


def test_every_printed_default_pasted_back_as_an_override_loads_to_that_default():
    # task.instruction's default "End with 'Answer: <number>'." was printed bare, which YAML refuses (': '); now
    # any string YAML would not read back as itself is printed quoted, and the override parser unquotes it.
    # Catches printing strings bare (the instruction fails to load) and a parser keeping the quotes.
    rows = config_rows(RunConfig)
    assert any(row.default.startswith('"') for row in rows)  # some default needs quotes (else this proves nothing)
    defaults = RunConfig().model_dump(mode="json")
    for row in rows:
        loaded = load_config(None, [f"{row.key}={row.default}"]).model_dump(mode="json")
        value, expected = loaded, defaults
        for part in row.key.split("."):
            value, expected = value[part], expected[part]
        assert value == expected, (row.key, row.default)


@pytest.mark.parametrize(("text", "printed"), [("plain words", "plain words"), ("", '""'), ("null", '"null"'),
                                                ("a: b", '"a: b"'), (" padded", '" padded"'), ("[x]", '"[x]"')])
def test_strings_are_quoted_only_when_yaml_would_not_read_them_back(text, printed):
    assert value_text(text) == printed
    assert parse_overrides([f"k={printed}"]) == {"k": text}
