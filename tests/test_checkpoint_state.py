"""Pieces of exact resume: the prompt stream's cursor, RNG capture, config differences, signals."""
from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap

import pytest
import torch

from rlvr.checkpoint.state import CountingStream, config_differences, restore_rng, rng_state


def test_counting_stream_resumes_at_the_same_item():
    def stream():
        rng = random.Random(7)
        while True:
            yield rng.randrange(1000)

    first = CountingStream(stream())
    for _ in range(25):
        next(first)
    resumed = CountingStream(stream(), skip=first.drawn)
    assert first.drawn == 25 and resumed.drawn == 25
    assert [next(resumed) for _ in range(10)] == [next(first) for _ in range(10)]


def test_rng_state_round_trip_replays_draws():
    state = rng_state()
    draws = (random.random(), torch.rand(3))
    restore_rng(state)
    assert random.random() == draws[0] and torch.equal(torch.rand(3), draws[1])


def test_config_differences_name_keys_and_ignore_free_ones():
    saved = {"seed": 1, "max_steps": 10, "rollout": {"group_size": 8, "top_p": 1.0}, "eval": {"every": 0}}
    asked = {"seed": 1, "max_steps": 40, "rollout": {"group_size": 4, "top_p": 1.0}, "eval": {"every": 5}}
    assert config_differences(saved, asked) == ["rollout.group_size: 8 -> 4"]
    assert config_differences(saved, saved) == []


_STOPPER = textwrap.dedent("""
    import sys, time
    from rlvr.checkpoint.stop import GracefulStop
    with GracefulStop() as stop:
        print("ready", flush=True)
        for step in range(100):
            time.sleep(0.05)  # a step in flight: the signal must not interrupt it
            if stop.requested:
                print(f"stopped after step {step} on {stop.signal_name}", flush=True)
                sys.exit(0)
    sys.exit(3)
""")


def _stopper():
    proc = subprocess.Popen([sys.executable, "-c", _STOPPER], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def test_first_signal_finishes_the_step_and_exits_zero():
    proc = _stopper()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "stopped after step" in out and "SIGTERM" in out
    assert "finishing this step" in err


def test_second_signal_exits_at_once():
    proc = subprocess.Popen([sys.executable, "-c", _STOPPER.replace("time.sleep(0.05)", "time.sleep(5)")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGINT)
    proc.stderr.readline()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + signal.SIGINT and "stopped" not in out and "exiting now" in err


def test_resume_keeps_each_log_s_lines_up_to_the_step_and_drops_a_torn_one(tmp_path):
    """On resume the logs are cut back to the checkpoint's step: the steps after it run again and write their lines
    again. A line a crash tore mid-write is dropped (kept, it broke every later reader of the file)."""
    import json

    from rlvr.checkpoint.resume import LOGS, truncate_logs

    lines = [json.dumps({"step": 1, "loss": 0.5}), json.dumps({"event": "start"}),  # no step: a run-level line
             json.dumps({"step": 2, "loss": 0.4}), json.dumps({"step": 3, "loss": 0.3}), "", '{"step": 2, "loss": 0.']
    (tmp_path / "metrics.jsonl").write_text("\n".join(lines))  # the torn line last, with no newline
    (tmp_path / "eval.jsonl").write_text(json.dumps({"step": 3, "pass@1": 0.5}) + "\n")
    (tmp_path / "notes.txt").write_text("not a log\n")
    truncate_logs(tmp_path, 2)
    assert (tmp_path / "metrics.jsonl").read_text().splitlines() == lines[:3]
    assert (tmp_path / "eval.jsonl").read_text() == "" and (tmp_path / "notes.txt").read_text() == "not a log\n"
    assert not (tmp_path / "samples.jsonl").exists() and "metrics.jsonl" in LOGS
    assert sorted(p.name for p in tmp_path.iterdir()) == ["eval.jsonl", "metrics.jsonl", "notes.txt"]  # no staging


def test_counting_stream_hands_out_from_the_first_item_and_counts_each():
    """Without skip nothing is dropped and nothing counted; it is its own iterator (the SFT loop slices it with
    itertools.islice, which calls iter() on it)."""
    import itertools

    stream = CountingStream(iter("abcdef"))
    assert stream.drawn == 0 and iter(stream) is stream
    assert list(itertools.islice(stream, 3)) == ["a", "b", "c"] and stream.drawn == 3
    assert "".join(stream) == "def" and stream.drawn == 6


def test_a_trainer_state_written_without_the_later_fields_loads_with_their_defaults(tmp_path):
    """A checkpoint written before the skip counters, the curriculum, the critic and `extra` were saved loads
    with none skipped, none of them, and an empty `extra` of its own (never one shared by two states)."""
    from rlvr.checkpoint.state import STATE_FILE, TrainerState, load_state

    torch.save({"step": 3, "prompts_drawn": 12, "rng": rng_state(), "optimizer": {}, "scheduler": {},
                "elapsed_s": 1.5}, tmp_path / STATE_FILE)
    state = load_state(tmp_path)
    assert (state.step, state.prompts_drawn, state.elapsed_s) == (3, 12, 1.5)
    assert (state.consecutive_skips, state.skipped_steps, state.curriculum, state.critic, state.extra) == (
        0, 0, None, None, {})
    other = TrainerState(step=1, prompts_drawn=0, rng={}, optimizer={}, scheduler={}, elapsed_s=0.0)
    other.extra["world_size"] = 2
    assert state.extra == {}


def test_a_state_saved_on_a_gpu_loads_on_a_machine_without_one(tmp_path, monkeypatch):
    """Optimizer moments saved by a GPU run are tagged cuda:0 in state.pt; resuming (or inspecting) that checkpoint
    on a CPU-only machine must load them onto the CPU, not fail. The file is written as a GPU run writes it (torch's
    location tag says cuda:0), so this CPU check catches the device mix. Mutation caught: map_location dropped."""
    import torch.serialization

    from rlvr.checkpoint.state import STATE_FILE, load_state

    monkeypatch.setattr(torch.serialization, "location_tag", lambda storage: "cuda:0")
    torch.save({"step": 2, "prompts_drawn": 8, "rng": {}, "optimizer": {"state": {0: {"exp_avg": torch.ones(2)}}},
                "scheduler": {}, "elapsed_s": 1.0}, tmp_path / STATE_FILE)
    monkeypatch.undo()
    state = load_state(tmp_path)
    moment = state.optimizer["state"][0]["exp_avg"]
    assert moment.device.type == "cpu" and moment.tolist() == [1.0, 1.0]


class _FakeCuda:
    """torch.cuda as a GPU run sees it, recorded: what rng_state saves and restore_rng sets of the CUDA RNGs."""

    def __init__(self, available: bool, initialized: bool):
        self.available, self.initialized, self.set_to = available, initialized, None

    def install(self, monkeypatch) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: self.available)
        monkeypatch.setattr(torch.cuda, "is_initialized", lambda: self.initialized)
        monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: ["cuda generator 0"])
        monkeypatch.setattr(torch.cuda, "set_rng_state_all", lambda states: setattr(self, "set_to", states))


@pytest.mark.parametrize(("available", "initialized", "saved"), [(True, True, True), (True, False, False),
                                                                (False, False, False)])
def test_the_cuda_rngs_are_saved_when_a_gpu_is_in_use_and_restored_where_one_is(monkeypatch, available,
                                                                                 initialized, saved):
    """A GPU run saves every device's RNG (the sampler may draw on the GPU); a process that never initialised
    CUDA has none to save (and asking would initialise it). On restore they are set where a GPU is present;
    a checkpoint of a GPU run resumed on a CPU-only machine skips them."""
    cuda = _FakeCuda(available, initialized)
    cuda.install(monkeypatch)
    state = rng_state()
    assert ("cuda" in state) is saved and state.get("cuda", ["cuda generator 0"]) == ["cuda generator 0"]
    restore_rng(state)
    assert cuda.set_to == (["cuda generator 0"] if saved else None)
    cuda.set_to = None
    restore_rng({**state, "cuda": ["from a GPU run"]})
    assert cuda.set_to == (["from a GPU run"] if available else None)


def test_numpy_s_rng_is_saved_only_when_numpy_is_loaded_and_restored_when_saved(monkeypatch, tmp_path):
    import numpy

    from rlvr.checkpoint.state import TrainerState, load_state, save_state

    numpy.random.seed(4)
    state = rng_state()
    expected = numpy.random.rand(2).tolist()
    save_state(TrainerState(step=1, prompts_drawn=0, rng=state, optimizer={}, scheduler={}, elapsed_s=0.0), tmp_path)
    numpy.random.seed(5)
    restore_rng(load_state(tmp_path).rng)  # numpy's state (arrays) comes back through the pickle as well
    assert numpy.random.rand(2).tolist() == expected
    numpy.random.seed(6)
    later = numpy.random.get_state()
    restore_rng({key: value for key, value in state.items() if key != "numpy"})
    assert numpy.random.get_state()[1].tolist() == later[1].tolist()  # a state without numpy's leaves it alone
    monkeypatch.delitem(sys.modules, "numpy")
    assert "numpy" not in rng_state()  # rlvr itself never imports numpy to save its state


def test_the_python_and_torch_rngs_are_each_restored():
    state = rng_state()
    draws = (random.random(), torch.rand(2))
    random.random(), torch.rand(2)
    restore_rng({**state, "torch": torch.get_rng_state()})  # python's back, torch's as it is now
    assert random.random() == draws[0] and not torch.equal(torch.rand(2), draws[1])
    restore_rng({**state, "python": random.getstate()})
    assert torch.equal(torch.rand(2), draws[1])


def test_config_differences_list_keys_on_one_side_only_nested_and_replaced_sections_with_reasons():
    saved = {"seed": 1, "rollout": {"group_size": 8, "dynamic_sampling": 5}, "threads": 1, "checkpoint": {"a": 1}}
    asked = {"seed": 1, "rollout": {"group_size": 8, "dynamic_sampling": {"enabled": True}, "top_k": 0},
             "threads": 2, "checkpoint": {"a": 2}, "new_key": 3}
    assert config_differences(saved, asked) == [
        "new_key: None -> 3",
        "rollout.dynamic_sampling: 5 -> {'enabled': True}",
        "rollout.top_k: None -> 0",
        "threads: 1 -> 2 (torch's CPU kernels split their sums over the threads, so another thread count adds in "
        "another order and the weights drift from the uninterrupted run's in the last bits)"]


def test_a_config_of_this_rlvr_compares_unchanged_and_one_that_no_longer_validates_as_written():
    """with_current_defaults reads a saved config back through RunConfig (older ones gain the new sections'
    defaults) in the JSON form it is compared in: this rlvr's own dump has no difference with itself (AdamW's
    betas are a tuple in Python, a list in JSON). One that no longer validates is compared key by key as it is."""
    from rlvr.checkpoint.state import with_current_defaults
    from rlvr.config.run import RunConfig

    current = RunConfig().model_dump(mode="json")
    assert config_differences(with_current_defaults(current), current) == []
    stale = {**current, "rollout": {**current["rollout"], "group_size": "many"}}
    assert with_current_defaults(stale) == stale
    assert config_differences(with_current_defaults(stale), current) == [
        f"rollout.group_size: 'many' -> {current['rollout']['group_size']!r}"]


def _weights_of(model) -> dict[str, torch.Tensor]:
    """What save_pretrained stores of a tied model: its tensors, the head once (as the embedding)."""
    return {k: v.detach().clone().contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}


def test_policy_weights_load_from_every_shard_and_the_tied_head_follows_the_embedding(tmp_path):
    """A checkpoint's weights may be split over several safetensors shards: all are read. The head of a tied model
    is not stored (tied weights are stored once): after loading it equals the loaded embedding, even when the
    policy in memory held it as a tensor of its own."""
    from safetensors.torch import save_file

    from conftest import tiny_llama
    from rlvr.checkpoint.state import load_policy_weights

    saved = _weights_of(tiny_llama(seed=1, tied=True))
    names = sorted(saved)
    save_file({k: saved[k] for k in names[: len(names) // 2]}, tmp_path / "model-00001-of-00002.safetensors")
    save_file({k: saved[k] for k in names[len(names) // 2:]}, tmp_path / "model-00002-of-00002.safetensors")
    policy = tiny_llama(seed=2, tied=True)
    policy.lm_head.weight = torch.nn.Parameter(policy.lm_head.weight.detach().clone())  # untied in memory
    assert not torch.equal(policy.model.embed_tokens.weight, saved["model.embed_tokens.weight"])
    load_policy_weights(policy, tmp_path)
    assert all(torch.equal(policy.state_dict()[k], v) for k, v in saved.items())
    assert torch.equal(policy.lm_head.weight, saved["model.embed_tokens.weight"])


@pytest.mark.parametrize("fault", ["missing", "unexpected"])
def test_checkpoint_weights_that_do_not_fit_the_model_are_refused_naming_the_first_five(tmp_path, fault):
    from safetensors.torch import save_file

    from conftest import tiny_llama
    from rlvr.checkpoint.state import load_policy_weights

    weights = _weights_of(tiny_llama(seed=1, tied=True))
    if fault == "missing":  # every layer-1 tensor (9 of them) is absent: the first five sorted are named
        gone = sorted(k for k in weights if k.startswith("model.layers.1."))
        weights = {k: v for k, v in weights.items() if k not in gone}
        expected = f"missing {gone[:5]}, unexpected []"
    else:
        extra = [f"head_{i}.weight" for i in range(7)]
        weights.update({name: torch.zeros(1) for name in extra})
        expected = f"missing [], unexpected {extra[:5]}"
    save_file(weights, tmp_path / "model.safetensors")
    with pytest.raises(RuntimeError, match="do not fit the model") as err:
        load_policy_weights(tiny_llama(seed=2, tied=True), tmp_path)
    assert str(err.value) == f"checkpoint weights in {tmp_path} do not fit the model: {expected}"
