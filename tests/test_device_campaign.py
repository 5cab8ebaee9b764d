"""benchmarks/device_campaign.py on the CPU: the GPU campaign's dry run brings back packed weights, cards and
its report within its deadline, and the packed files unpack into run folders that load like zoo entries."""

from __future__ import annotations

import json
import time

import pytest
import torch
from kit import REPO, child_env, make_card, run_python, write_toml

import vaezoo
from vaezoo.entries.catalog import parse_card
from vaezoo.entries.checkpoints import read_checkpoint

SCRIPT = str(REPO / "benchmarks" / "device_campaign.py")


@pytest.mark.slow
def test_the_campaigns_cpu_dry_run_brings_back_weights_and_json_within_its_deadline(data_plugin, tmp_path):
    cards = [write_toml(tmp_path / f"{name}.toml", make_card("toy", name=name, eval_metrics=["cluster_accuracy"]))
             for name in ("toy-first", "toy-second")]
    plan = tmp_path / "plan.toml"
    plan.write_text("".join(f'[[recipe]]\ncard = "{card}"\nseeds = [0, 1, 2]\n\n' for card in cards))
    out, env = tmp_path / "out", child_env(tmp_path / "home", site=data_plugin)
    started = time.monotonic()
    # 16 steps: past the recipe's 12 (a dry run longer than the recipe) and its checkpoints every 4
    done = run_python(SCRIPT, "--device", "cpu", "--plan", str(plan), "--steps", "16", "--deadline", "240",
                      "--warm", "2", "--measure", "3", "--eval-at-once", "2",
                      "--out", str(out), "--work", str(tmp_path / "work"), "--state", str(tmp_path / "state"), env=env,
                      timeout=300)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 240

    report = json.loads((out / "campaign.json").read_text())
    assert set(report["step_ms"]) == {f"toy-{n} {f}" for n in ("first", "second") for f in ("vmap", "loop")}
    assert all(v > 0 for v in report["step_ms"].values()) and set(report["formulation"]) == {"toy-first", "toy-second"}
    for recipe in report["recipes"]:
        assert recipe["status"] == "finished" and [m["step"] for m in recipe["members"]] == [16, 16, 16]
        assert all(e["status"] == 0 for e in recipe["evaluations"].values()), recipe["evaluations"]
    assert sorted(p.name for p in out.iterdir()) == ["campaign.json", "toy-first.campaign.safetensors",
                                                     "toy-second.campaign.safetensors"]

    runs = tmp_path / "runs"
    unpacked = run_python(SCRIPT, "unpack", str(out), "--out", str(runs), env=env)
    assert unpacked.returncode == 0, unpacked.stderr
    for name in ("toy-first", "toy-second"):
        trained = {seed: vaezoo.load(str(runs / name / f"seed-{seed}")) for seed in (0, 1, 2)}
        for seed, model in trained.items():
            card = parse_card(runs / name / f"seed-{seed}" / f"{name}.toml")
            assert card.train.seed == seed and card.train.steps == 16 and "cluster_accuracy" in card.metrics
        assert not torch.equal(trained[0].head.weight, trained[1].head.weight)


def test_the_campaign_lists_missing_packages_before_training(tmp_path):
    env = child_env(tmp_path / "home")
    probe = ("import importlib.metadata as m, runpy, sys; real = m.version\n"
             "def version(name):\n"
             "    if name == 'pydantic': raise m.PackageNotFoundError(name)\n"
             "    return real(name)\n"
             "m.version = version; sys.argv = ['device_campaign.py', '--device', 'cpu']\n"
             f"runpy.run_path({SCRIPT!r}, run_name='__main__')\n")
    done = run_python("-c", probe, env=env)
    assert done.returncode == 2 and "missing packages: pydantic" in done.stderr


@pytest.mark.slow
def test_a_recipe_too_long_for_one_span_goes_on_from_its_checkpoints_in_the_next(data_plugin, tmp_path):
    card = write_toml(tmp_path / "toy-long.toml", make_card("toy", name="toy-long", train={"epochs": 4000}))
    plan = tmp_path / "plan.toml"
    plan.write_text(f'[[recipe]]\ncard = "{card}"\nseeds = [0, 1]\n')
    env, state = child_env(tmp_path / "home", site=data_plugin), tmp_path / "state"
    common = ["--device", "cpu", "--plan", str(plan), "--formulation", "loop", "--warm", "2", "--measure", "3",
              "--partial", "--no-eval", "--deadline", "60", "--work", str(tmp_path / "work"), "--state", str(state)]
    first = run_python(SCRIPT, *common, "--out", str(tmp_path / "span1"), env=env, timeout=120)
    assert first.returncode == 0, first.stderr
    [recipe] = json.loads((tmp_path / "span1" / "campaign.json").read_text())["recipes"]
    assert recipe["status"] == "stopped by the deadline" and recipe["from_step"] == 0
    reached = recipe["members"][0]["step"]
    assert 0 < reached < 12000 and sorted(p.name for p in (tmp_path / "span1").glob("*.pt")) == [
        "toy-long.seed-0.checkpoint.pt", "toy-long.seed-1.checkpoint.pt"]

    for folder in state.iterdir():  # a fresh machine: only what came back is there
        __import__("shutil").rmtree(folder)
    kept = run_python(SCRIPT, "keep", str(tmp_path / "span1"), "--state", str(state), env=env)
    assert kept.returncode == 0, kept.stderr
    second = run_python(SCRIPT, *common, "--out", str(tmp_path / "span2"), env=env, timeout=120)
    assert second.returncode == 0, second.stderr
    [recipe] = json.loads((tmp_path / "span2" / "campaign.json").read_text())["recipes"]
    assert recipe["from_step"] == reached and recipe["members"][0]["step"] > reached

    late = run_python(SCRIPT, "keep", str(tmp_path / "span1"), "--state", str(state), env=env)  # out of order
    assert late.returncode == 0 and "an earlier span's" in late.stdout, late.stderr
    kept = read_checkpoint(state / "toy-long" / "seed-0" / "checkpoint.pt", fix="")
    assert kept.step == recipe["members"][0]["step"]


@pytest.mark.slow
def test_a_recipe_a_span_finished_is_skipped_by_later_spans(data_plugin, tmp_path):
    card = write_toml(tmp_path / "toy-done.toml", make_card("toy", name="toy-done"))
    plan = tmp_path / "plan.toml"
    plan.write_text(f'[[recipe]]\ncard = "{card}"\nseeds = [0, 1]\n')
    returned, state = tmp_path / "span", tmp_path / "state"
    returned.mkdir()
    (returned / "campaign.json").write_text(json.dumps({"recipes": [{"name": "toy-done", "status": "finished"}]}))
    (state / "toy-done" / "seed-0").mkdir(parents=True)
    (state / "toy-done" / "seed-0" / "checkpoint.pt").write_bytes(b"the step a span began from")
    env = child_env(tmp_path / "home", site=data_plugin)

    kept = run_python(SCRIPT, "keep", str(returned), "--state", str(state), env=env)
    assert kept.returncode == 0, kept.stderr
    assert sorted(p.name for p in (state / "toy-done").iterdir()) == ["finished.json"]
    again = run_python(SCRIPT, "--device", "cpu", "--plan", str(plan), "--out", str(tmp_path / "out"),
                       "--state", str(state), "--work", str(tmp_path / "work"), env=env)
    assert again.returncode == 0, again.stderr
    assert "toy-done: finished in an earlier span" in again.stdout
    assert "every recipe of the plan has finished" in again.stdout and not (tmp_path / "work").exists()
    assert json.loads((tmp_path / "out" / "campaign.json").read_text())["recipes"] == []
    nothing = run_python(SCRIPT, "keep", str(tmp_path / "out"), "--state", str(state), env=env)
    assert nothing.returncode == 0, nothing.stderr
    assert sorted(p.name for p in (state / "toy-done").iterdir()) == ["finished.json"]


def test_keep_refuses_a_folder_without_the_spans_report(tmp_path):
    returned = tmp_path / "span"
    returned.mkdir()
    (returned / "toy.seed-0.checkpoint.pt").write_bytes(b"a checkpoint without its span's campaign.json")
    done = run_python(SCRIPT, "keep", str(returned), "--state", str(tmp_path / "state"),
                      env=child_env(tmp_path / "home"))
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        f"{returned / 'campaign.json'}: not found; keep takes the folder a span's files came back in, its "
        "campaign.json among them"]
    assert not (tmp_path / "state").exists()
