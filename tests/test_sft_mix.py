"""Rows mixed into the SFT data (sft.mix_data, sft.mix_ratio; rlvr/sft/mix.py), as R1 sec. 2.3.3 mixes
non-reasoning rows into its SFT.

m mixed rows make a share r of the training rows when m / (main + m) = r, i.e. m = round(main x r / (1 - r)):
main 6, r 0.25 -> 6 x 0.25 / 0.75 = 2; main 6, r 0.5 -> 6; main 576, r 0.2 -> 576 x 0.2 / 0.8 = 144.
"""
from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from rlvr.cli.main import main
from rlvr.config.run import load_config
from rlvr.model.load import load_tokenizer
from rlvr.sft.mix import draw_mix
from rlvr.sft.trainer import SFTLogger, load_examples, sft
from test_sft import overrides, stop_after_step, write_data


@pytest.mark.parametrize("available, main_rows, ratio, wanted, replacement", [
    (10, 6, 0.25, 2, False),  # 6 x 0.25 / 0.75 = 2, and 10 rows hold 2
    (10, 6, 0.5, 6, False),  # 6 x 0.5 / 0.5 = 6
    (36, 576, 0.2, 144, True),  # 576 x 0.2 / 0.8 = 144 > 36 rows: drawn with replacement
    (5, 6, 0.0, 0, False),  # no share, no rows
    (4, 12, 0.25, 4, False),  # 12 x 0.25 / 0.75 = 4 = every row once: exactly enough, so no repeats
])
def test_draw_mix_takes_the_share_of_the_training_rows(available, main_rows, ratio, wanted, replacement):
    draw = draw_mix(available, main_rows, ratio, seed=3)
    assert len(draw.indices) == wanted and draw.with_replacement is replacement and draw.available == available
    assert all(0 <= i < available for i in draw.indices)
    if not replacement:
        assert len(set(draw.indices)) == wanted  # without replacement: each row at most once
    assert draw_mix(available, main_rows, ratio, seed=3) == draw  # seeded: the same rows on every run and resume


def test_a_draw_is_a_value_that_cannot_change():
    draw = draw_mix(10, 6, 0.25, seed=3)
    with pytest.raises(AttributeError):  # frozen: the rows chosen once are the rows trained on
        draw.indices = (0, 0)


def test_draw_mix_depends_on_the_seed_and_needs_rows():
    assert draw_mix(100, 300, 0.25, seed=1).indices != draw_mix(100, 300, 0.25, seed=2).indices  # 100 of 100
    with pytest.raises(ValueError, match="no usable row"):
        draw_mix(0, 6, 0.25, seed=1)


def mix_file(path, rows: int = 4) -> str:
    lines = [{"messages": [{"role": "user", "content": f"Compute {i} * 3."},
                           {"role": "assistant", "content": f"{i} * 3 = {3 * i}"}]} for i in range(rows)]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return str(path)


def test_load_examples_appends_the_mixed_rows(tiny_model_dir, tmp_path):
    main_data, mixed = write_data(tmp_path / "main.jsonl", rows=6), mix_file(tmp_path / "mix.jsonl", rows=4)
    config = load_config(None, overrides(tiny_model_dir, tmp_path / "run", main_data,
                                         f"sft.mix_data={mixed}", "sft.mix_ratio=0.25"))
    tokenizer = load_tokenizer(config.model)
    examples = load_examples(config, tokenizer, 512)
    assert len(examples) == 8  # 6 rows of sft.data + round(6 x 0.25 / 0.75) = 2 mixed rows
    mixed_ids = [e.row_id for e in examples[6:]]
    assert all(row_id.startswith(mixed) for row_id in mixed_ids) and len(set(mixed_ids)) == 2
    assert all(not e.row_id.startswith(mixed) for e in examples[:6])
    unmixed = load_config(None, overrides(tiny_model_dir, tmp_path / "run", main_data))
    assert len(load_examples(unmixed, tokenizer, 512)) == 6  # mix_ratio 0 (the default): sft.data alone


def test_the_mixed_rows_follow_the_run_seed(tiny_model_dir, tmp_path):
    main_data, mixed = write_data(tmp_path / "main.jsonl", rows=6), mix_file(tmp_path / "mix.jsonl", rows=40)

    def mixed_ids(seed: int) -> list[str]:
        config = load_config(None, overrides(tiny_model_dir, tmp_path / "run", main_data, f"seed={seed}",
                                             f"sft.mix_data={mixed}", "sft.mix_ratio=0.25"))
        return [e.row_id for e in load_examples(config, load_tokenizer(config.model), 512)[6:]]
    # 2 of 40 rows: two seeds pick the same ordered pair with chance 1 / 1560
    assert mixed_ids(1) == mixed_ids(1) and mixed_ids(1) != mixed_ids(2)


def test_a_share_that_rounds_to_no_row_is_an_error_and_the_share_is_capped(tiny_model_dir, tmp_path, capsys):
    main_data, mixed = write_data(tmp_path / "main.jsonl", rows=6), mix_file(tmp_path / "mix.jsonl")
    out = tmp_path / "run"
    assert main(["sft", *overrides(tiny_model_dir, out, main_data, f"sft.mix_data={mixed}",
                                   "sft.mix_ratio=0.05")]) == 2  # round(6 x 0.05 / 0.95) = round(0.32) = 0
    assert "sft.mix_ratio=0.05 of 6 rows of sft.data rounds to 0 mixed rows" in capsys.readouterr().err
    for ratio in ("0.95", "-0.1"):  # 19 mixed rows per row of sft.data; a negative share
        assert main(["sft", *overrides(tiny_model_dir, out, main_data, f"sft.mix_data={mixed}",
                                       f"sft.mix_ratio={ratio}")]) == 2
        assert "sft.mix_ratio" in capsys.readouterr().err
    assert not out.exists()


def test_a_mixed_run_trains_on_both_and_records_them(tiny_model_dir, tmp_path, capsys):
    main_data, mixed = write_data(tmp_path / "main.jsonl", rows=6), mix_file(tmp_path / "mix.jsonl", rows=1)
    out = tmp_path / "run"
    assert main(["sft", *overrides(tiny_model_dir, out, main_data, f"sft.mix_data={mixed}",
                                   "sft.mix_ratio=0.5")]) == 0
    err = capsys.readouterr().err
    assert "sft.mix_data: 6 rows mixed into 6 (mix_ratio 0.5; drawn with replacement" in err  # 1 row, 6 wanted
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(records) == 6  # ceil(2 epochs x 12 rows / batch 4)
    assert load_config(out / "config.yaml").sft.mix_data == mixed


@pytest.mark.parametrize("extra, message", [
    (["sft.mix_ratio=0.25"], "sft.mix_ratio=0.25 needs sft.mix_data"),
    (["sft.mix_data=MIX"], "sft.mix_ratio is 0"),
    (["sft.mix_data=missing/mix.jsonl", "sft.mix_ratio=0.25"], "sft.mix_data: 'missing/mix.jsonl' does not exist"),
])
def test_a_mix_half_set_is_one_error_before_any_directory(tiny_model_dir, tmp_path, capsys, extra, message):
    mixed = mix_file(tmp_path / "mix.jsonl")
    out = tmp_path / "run"
    extra = [e.replace("MIX", mixed) for e in extra]
    assert main(["sft", *overrides(tiny_model_dir, out, write_data(tmp_path / "d.jsonl")), *extra]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_a_stopped_mixed_run_resumes_to_the_same_weights_and_refuses_another_mix(tiny_model_dir, tmp_path,
                                                                                   monkeypatch, capsys):
    main_data, mixed = write_data(tmp_path / "main.jsonl", rows=6), mix_file(tmp_path / "mix.jsonl", rows=4)
    extra = (f"sft.mix_data={mixed}", "sft.mix_ratio=0.25", "sft.epochs=2")  # 8 rows x 2 / 4 = 4 steps
    straight = sft(load_config(None, overrides(tiny_model_dir, tmp_path / "straight", main_data, *extra)))
    before = load_file(tiny_model_dir / "model.safetensors")
    after = load_file(straight / "model.safetensors")
    assert any(not torch.equal(before[k], after[k]) for k in after)  # trained: the comparison below means something
    log_step = stop_after_step(monkeypatch, 2)  # a real SIGTERM: the step finishes and is checkpointed
    out = tmp_path / "stopped"
    assert sft(load_config(None, overrides(tiny_model_dir, out, main_data, *extra))).name == "step-000002"
    monkeypatch.setattr(SFTLogger, "log_step", log_step)
    original = (tmp_path / "mix.jsonl").read_text()
    mix_file(tmp_path / "mix.jsonl", rows=3)  # other mixed rows: the cursor would index other data
    assert main(["sft", "--resume", str(out)]) == 2
    assert "the SFT data differs" in capsys.readouterr().err
    (tmp_path / "mix.jsonl").write_text(original)
    assert main(["sft", "--resume", str(out)]) == 0
    resumed = load_file(out / "final" / "model.safetensors")
    assert all(torch.equal(after[k], resumed[k]) for k in after)
