"""`rlvr sft` on the tiny random Llama with its character tokenizer: the assistant-token
mask, the global loss normaliser (accumulation does not change the step), padding-free packing equal to
padded batches, the run directory, bit-exact resume after a SIGTERM, and the command's errors."""
from __future__ import annotations

import copy
import json
import os
import signal

import pytest
import torch
from safetensors.torch import load_file

from rlvr.cli.main import main
from rlvr.config.run import ModelConfig, load_config
from rlvr.model.load import load_model, load_tokenizer
from rlvr.sft.batching import micro_batches, pack_rows, pad_rows, row_stream, split_rows, total_steps
from rlvr.sft.data import BadRow, ChatRow, Turn
from rlvr.sft.masking import encode_row
from rlvr.sft.step import SFTOutOfMemory, StepSettings, sft_step, target_nll
from rlvr.sft.trainer import SFTLogger, setup, sft

ONE_SHOT = (Turn("user", "What is 3 + 4?"), Turn("assistant", "7"), Turn("user", "What is 2 + 2?"),
            Turn("assistant", "4 ok"))


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return load_tokenizer(ModelConfig(name_or_path=str(tiny_model_dir)))


@pytest.fixture(scope="module")
def model(tiny_model_dir):
    return load_model(ModelConfig(name_or_path=str(tiny_model_dir)), trainable=True)


def targets(tokenizer, example) -> str:
    return tokenizer.decode(example.input_ids[example.target_mask])


def test_mask_covers_the_assistant_text_and_its_end_of_turn_token(tokenizer):
    example = encode_row(tokenizer, ChatRow("r", 0, (Turn("user", "hi"), Turn("assistant", "yo"))), "last_assistant",
                         512)
    # One token per character: "<|im_start|>" (0) "user" (1-4) "\n" (5) "hi" (6-7) "<|im_end|>" (8) "\n" (9)
    # "<|im_start|>" (10) "assistant" (11-19) "\n" (20) "yo" (21-22) "<|im_end|>" (23) "\n" (24). Trained on:
    # the reply and its end-of-turn token, not the newline the template writes after it.
    assert example.length == 25
    assert example.target_mask.nonzero().flatten().tolist() == [21, 22, 23]


def test_earlier_assistant_turns_are_context_unless_asked(tokenizer):
    last = encode_row(tokenizer, ChatRow("r", 0, ONE_SHOT), "last_assistant", 512)
    every = encode_row(tokenizer, ChatRow("r", 0, ONE_SHOT), "assistant", 512)
    assert targets(tokenizer, last) == "4 ok<|im_end|>"
    assert targets(tokenizer, every) == "7<|im_end|>4 ok<|im_end|>"
    assert torch.equal(last.input_ids, every.input_ids)


def test_tokenizers_without_offsets_get_the_same_mask(tokenizer, monkeypatch):
    fast = encode_row(tokenizer, ChatRow("r", 0, ONE_SHOT), "assistant", 512)
    monkeypatch.setattr("rlvr.sft.masking._offsets", lambda tokenizer, text: None)  # a slow tokenizer
    slow = encode_row(tokenizer, ChatRow("r", 0, ONE_SHOT), "assistant", 512)
    assert torch.equal(slow.input_ids, fast.input_ids) and torch.equal(slow.target_mask, fast.target_mask)


def test_a_template_that_rewrites_history_is_a_bad_row_not_a_wrong_mask(tokenizer):
    rewriting = copy.deepcopy(tokenizer)  # drops the text of earlier assistant turns, as some reasoning templates do
    rewriting.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% if m['role'] == 'assistant' and not loop.last %}"
        "...{% else %}{{ m['content'] }}{% endif %}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    assert targets(rewriting, encode_row(rewriting, ChatRow("r", 0, ONE_SHOT), "last_assistant", 512)) == \
        "4 ok<|im_end|>"
    with pytest.raises(BadRow, match="chat template mismatch"):
        encode_row(rewriting, ChatRow("r", 0, ONE_SHOT), "assistant", 512)


def test_row_stream_and_step_count():
    first, again = list(row_stream(10, 2, seed=1)), list(row_stream(10, 2, seed=1))
    assert first == again and sorted(first[:10]) == sorted(first[10:]) == list(range(10))
    assert first[:10] != first[10:]  # each epoch is shuffled anew
    assert total_steps(10, 2, 4) == 5  # ceil(2 x 10 / 4) = ceil(5)
    assert total_steps(10, 1, 4) == 3  # ceil(10 / 4) = ceil(2.5): the last step holds 2 rows


def examples_of(tokenizer):
    rows = [(Turn("user", "a"), Turn("assistant", "b")),  # 1 reply char + <|im_end|> = 2 targets
            (Turn("user", "what is 12 + 30?"), Turn("assistant", "12 + 30 = 42")),  # 12 + 1 = 13 targets
            ONE_SHOT, (Turn("user", "go"), Turn("assistant", "done, ok"))]
    return [encode_row(tokenizer, ChatRow(str(i), i, t), "last_assistant", 512) for i, t in enumerate(rows)]


def one_sgd_step(model, examples, micro: int, batching: str = "length_grouped"):
    """(loss, weight change) of one step; SGD with lr 1 makes the change minus the gradient itself."""
    policy = copy.deepcopy(model)
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    optimizer = torch.optim.SGD(policy.parameters(), lr=1.0)
    stats = sft_step(policy, examples, optimizer, None, StepSettings(micro, batching, 1e9, 2))
    return stats, {k: v - before[k] for k, v in policy.state_dict().items()}


def test_loss_is_the_mean_over_every_assistant_token_of_the_step(tokenizer, model):
    examples = examples_of(tokenizer)
    assert [e.targets for e in examples[:2]] == [2, 13]
    with torch.no_grad():
        sums = [target_nll(model, pad_rows([e], 2)).item() for e in examples[:2]]
    stats, _ = one_sgd_step(model, examples[:2], micro=1)
    # Global normaliser: (nll_0 + nll_1) / (2 + 13); a mean of per-micro-batch means would be
    # (nll_0 / 2 + nll_1 / 13) / 2, which weighs the 2 tokens of row 0 6.5x more than those of row 1.
    assert stats.loss == pytest.approx((sums[0] + sums[1]) / 15, rel=1e-5)
    assert stats.loss != pytest.approx((sums[0] / 2 + sums[1] / 13) / 2, rel=1e-5)  # apart by ~5e-4 here
    assert stats.tokens == 15 and stats.skipped == 0.0


def test_accumulation_does_not_change_the_step(tokenizer, model):
    examples = examples_of(tokenizer)
    whole, delta_whole = one_sgd_step(model, examples, micro=4)
    split, delta_split = one_sgd_step(model, examples, micro=1)
    uneven, delta_uneven = one_sgd_step(model, examples, micro=3)  # micro-batches of 3 and 1 rows
    assert whole.loss == pytest.approx(split.loss, rel=1e-5) == pytest.approx(uneven.loss, rel=1e-5)
    for key in delta_whole:
        torch.testing.assert_close(delta_split[key], delta_whole[key], rtol=1e-4, atol=1e-6)
        torch.testing.assert_close(delta_uneven[key], delta_whole[key], rtol=1e-4, atol=1e-6)


def test_chunked_lm_head_gives_the_same_step(tokenizer, model, monkeypatch):
    examples = examples_of(tokenizer)
    whole, delta_whole = one_sgd_step(model, examples, micro=4)
    monkeypatch.setattr("rlvr.sft.step.HEAD_CHUNK", 5)  # 2 + 13 + 5 + 9 = 29 targets: 6 chunks
    chunked, delta_chunked = one_sgd_step(model, examples, micro=4)
    assert chunked.loss == pytest.approx(whole.loss, rel=1e-5)
    for key in delta_whole:
        torch.testing.assert_close(delta_chunked[key], delta_whole[key], rtol=1e-4, atol=1e-6)


def test_padding_free_equals_length_grouped(tokenizer, model):
    examples = examples_of(tokenizer)
    padded, delta_padded = one_sgd_step(model, examples, micro=4)
    packed, delta_packed = one_sgd_step(model, examples, micro=4, batching="padding_free")
    assert packed.loss == pytest.approx(padded.loss, rel=1e-5)
    assert packed.input_tokens == padded.input_tokens == sum(e.length for e in examples)
    for key in delta_padded:
        torch.testing.assert_close(delta_packed[key], delta_padded[key], rtol=1e-4, atol=1e-6)
    # The comparison can see a leak: the same pack with a plain all-ones mask lets tokens attend across rows.
    (pack,) = micro_batches(examples, 4, "padding_free", 2)
    leaking = pack_rows(examples)
    leaking = type(leaking)(leaking.input_ids, leaking.position_ids, torch.ones_like(leaking.input_ids),
                            leaking.target_mask, leaking.rows)
    with torch.no_grad():
        assert target_nll(model, leaking).item() != pytest.approx(target_nll(model, pack).item(), rel=1e-4)


def test_shared_prefix_layout_cuts_each_row_at_its_first_trained_token(tokenizer):
    examples = examples_of(tokenizer)[:2]
    batch = split_rows(examples, pad_id=2)
    # One token per character, a special token one: row 0 "<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\n"
    # is 1 + 4 + 1 + 1 + 1 + 1 + 1 + 9 + 1 = 20 prompt tokens, then "b" and <|im_end|> trained (tokens 20-21); row 1's
    # question "what is 12 + 30?" is 15 characters longer than "a", so its prompt is 20 + 15 = 35 tokens.
    assert [int(m.sum()) for m in batch.prompt_mask] == [20, 35]
    assert batch.prompt_ids.shape == (2, 35) and int(batch.prompt_mask[0, :15].sum()) == 0  # left-padded
    assert tokenizer.decode(batch.completion_ids[0, :2]) == "b<|im_end|>"  # the template's last newline: dropped
    assert batch.completion_mask.sum(dim=1).tolist() == [2, 13]
    for row, e in enumerate(examples):  # prompt + completion give back the row up to its last target
        joined = torch.cat([batch.prompt_ids[row][batch.prompt_mask[row].bool()],
                            batch.completion_ids[row][batch.completion_mask[row].bool()]])
        assert torch.equal(joined, e.input_ids[:int(e.target_mask.nonzero()[-1]) + 1])


@pytest.mark.parametrize("train_on", ["last_assistant", "assistant"])
def test_shared_prefix_equals_length_grouped(tokenizer, model, train_on):
    # train_on=assistant leaves holes in a completion (the one-shot row's second question is context between its
    # two trained replies): they must be run through the model but not trained on.
    examples = [encode_row(tokenizer, ChatRow(str(i), i, turns), train_on, 512) for i, turns in enumerate(
        [(Turn("user", "what is 12 + 30?"), Turn("assistant", "12 + 30 = 42")), ONE_SHOT,
         (Turn("user", "what is 12 + 3?"), Turn("assistant", "15"))])]  # rows 0 and 2 open alike: shared
    padded, delta_padded = one_sgd_step(model, examples, micro=3)
    shared, delta_shared = one_sgd_step(model, examples, micro=3, batching="shared_prefix")
    assert all(delta.abs().sum() > 0 for key, delta in delta_padded.items() if "embed" not in key)  # it trained
    assert shared.loss == pytest.approx(padded.loss, rel=1e-5) and shared.tokens == padded.tokens
    assert shared.input_tokens < padded.input_tokens  # the template's trailing newlines are not run
    for key in delta_padded:
        torch.testing.assert_close(delta_shared[key], delta_padded[key], rtol=1e-4, atol=1e-6)


def test_non_finite_gradient_skips_the_step(tokenizer, model):
    policy = copy.deepcopy(model)
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-2)
    hook = next(policy.parameters()).register_hook(lambda g: torch.full_like(g, float("nan")))
    stats = sft_step(policy, examples_of(tokenizer), optimizer, None, StepSettings(2, "length_grouped", 1.0, 2))
    hook.remove()
    assert stats.skipped == 1.0 and not optimizer.state
    assert all(torch.equal(before[k], v) for k, v in policy.state_dict().items())


def write_data(path, rows: int = 6) -> str:
    lines = [{"messages": [{"role": "user", "content": f"What is {i} + {i}?"},
                           {"role": "assistant", "content": f"{i} + {i} = {2 * i}. Answer: {2 * i}"}]}
             for i in range(rows)]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return str(path)


def overrides(model_dir, out, data, *extra) -> list[str]:
    return [f"model.name_or_path={model_dir}", f"output_dir={out}", f"sft.data={data}", "sft.batch_size=4",
            "optimizer.micro_batch_size=2", "optimizer.lr=1e-3", "optimizer.warmup_steps=2",
            "optimizer.weight_decay=0.01", "threads=1", *extra]


def test_end_to_end_lowers_the_loss_on_a_repeated_example(tiny_model_dir, tmp_path):
    data = tmp_path / "same.jsonl"
    row = {"prompt": "What is 2 + 2?", "completion": "2 + 2 = 4. Answer: 4"}
    data.write_text(json.dumps(row) + "\n")
    out = tmp_path / "run"
    assert main(["sft", *overrides(tiny_model_dir, out, data, "sft.epochs=12", "sft.batch_size=1",
                                   "optimizer.lr=1e-2", "optimizer.warmup_steps=0")]) == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records] == list(range(1, 13))  # ceil(12 epochs x 1 row / 1)
    assert {"step", "loss", "lr", "grad_norm", "tokens", "epoch", "skipped_steps"} <= set(records[0])
    assert records[0]["tokens"] == len(row["completion"]) + 1  # the reply and its <|im_end|>
    assert records[-1]["loss"] < 0.5 * records[0]["loss"]
    assert load_config(out / "config.yaml").sft.data == str(data)
    assert (out / "final" / "config.json").is_file() and list((out / "checkpoints").glob("step-000012/COMPLETE"))



def test_setup_builds_the_trainers_fused_adamw_and_warm_up(tiny_model_dir, tmp_path):
    """rlvr/training/optim.py, as GRPO: fused AdamW (SFT's steps may differ from the old foreach AdamW
    at float rounding), lr 1e-3 warmed up over 2 steps."""
    out = tmp_path / "run"
    out.mkdir()
    run = setup(load_config(None, overrides(tiny_model_dir, out, write_data(tmp_path / "d.jsonl"))), out)
    run.logger.close()
    group = run.optimizer.param_groups[0]
    assert group["fused"] is True and (group["lr"], group["weight_decay"]) == (pytest.approx(5e-4), 0.01)

def weights(path) -> dict[str, torch.Tensor]:
    return load_file(path / "model.safetensors")


def stop_after_step(monkeypatch, step: int):
    """Send a real SIGTERM once SFT has logged `step` (GracefulStop finishes the step and checkpoints); returns the
    original SFTLogger.log_step, to put back."""
    log_step = SFTLogger.log_step

    def stop(self, record):
        log_step(self, record)
        if record["step"] == step:
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(SFTLogger, "log_step", stop)
    return log_step


def test_sigterm_then_resume_is_bit_exact(tiny_model_dir, tmp_path, monkeypatch, capsys):
    data = write_data(tmp_path / "d.jsonl")  # 6 rows x 3 epochs / 4 per step = 5 steps, the last of 2 rows
    extra = ("sft.epochs=3",)
    straight = sft(load_config(None, overrides(tiny_model_dir, tmp_path / "straight", data, *extra)))
    assert straight.name == "final"

    log_step = stop_after_step(monkeypatch, 2)
    out = tmp_path / "stopped"
    stopped = sft(load_config(None, overrides(tiny_model_dir, out, data, *extra)))
    assert stopped == out / "checkpoints" / "step-000002" and not (out / "final").exists()
    monkeypatch.setattr(SFTLogger, "log_step", log_step)
    original = (tmp_path / "d.jsonl").read_text()
    write_data(tmp_path / "d.jsonl", rows=5)  # the cursor would index other rows: refused, the run untouched
    assert main(["sft", "--resume", str(out)]) == 2
    assert "the SFT data differs" in capsys.readouterr().err
    (tmp_path / "d.jsonl").write_text(original)
    assert main(["sft", "--resume", str(out)]) == 0
    a, b = weights(straight), weights(out / "final")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    steps = [json.loads(line)["step"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4, 5]


def test_padding_free_run_writes_a_model(tiny_model_dir, tmp_path):
    out = tmp_path / "packed"
    final = sft(load_config(None, overrides(tiny_model_dir, out, write_data(tmp_path / "d.jsonl"),
                                            "sft.batching=padding_free", "sft.epochs=1")))
    assert final == out / "final" and (final / "model.safetensors").is_file()


def test_cli_errors_are_one_line_and_claim_no_directory(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "run"
    args = [a for a in overrides(tiny_model_dir, out, "x") if not a.startswith("sft.data=")]
    assert main(["sft", *args]) == 2
    assert "rlvr: error: sft.data is required" in capsys.readouterr().err
    assert main(["sft", *args, "sft.data=missing/chats.jsonl"]) == 2
    assert capsys.readouterr().err.strip() == "rlvr: error: sft.data: 'missing/chats.jsonl' does not exist"
    assert not out.exists()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"messages": [{"role": "user", "content": "q"}]}) + "\n")
    assert main(["sft", *args, f"sft.data={bad}"]) == 2
    assert "no usable row for SFT" in capsys.readouterr().err
    assert not out.exists()  # the claimed directory is released when nothing was written
    assert main(["sft", "--resume", str(tmp_path / "nowhere")]) == 2
    assert "not an rlvr run directory" in capsys.readouterr().err



@pytest.mark.parametrize("error, raised", [
    (torch.OutOfMemoryError("CUDA out of memory (injected)"), SFTOutOfMemory),
    (RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 123 bytes (injected)"),
     SFTOutOfMemory),
    (RuntimeError("shapes cannot be multiplied (injected)"), RuntimeError),  # a bug is not relabelled
])
def test_out_of_memory_in_a_micro_batch_names_the_setting(tokenizer, model, error, raised):
    """Both out-of-memory forms (rlvr/training/guards.py) become one SFTOutOfMemory naming the setting."""
    policy = copy.deepcopy(model)

    def fail(module, args):
        raise error
    policy.get_input_embeddings().register_forward_pre_hook(fail)
    optimizer = torch.optim.AdamW(policy.parameters(), lr=1e-2)
    with pytest.raises(raised) as err:
        sft_step(policy, examples_of(tokenizer), optimizer, None, StepSettings(2, "length_grouped", 1.0, 2))
    assert (err.type is SFTOutOfMemory) == ("optimizer.micro_batch_size (now 2)" in str(err.value))
    assert err.type is raised
