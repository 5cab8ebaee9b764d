"""Concurrent writers: card updates both land, a run folder has one writer, convert and gallery overwrite
nothing they did not write (vaezoo.store.locks)."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from kit import cli, install_package, make_card, refuse_writes, run_python, write_card, write_entry, write_toml

from vaezoo.entries.catalog import parse_card
from vaezoo.entries.entry import update_card, verify_entries
from vaezoo.entries.schema import Metric, SeedRun, SeedSpread
from vaezoo.errors import OutputError, VaezooError
from vaezoo.store import locks


def _metric(value: float) -> Metric:
    return Metric(value=value, command="vaezoo eval x", vaezoo_version="0.1.0")


def test_two_card_updates_at_once_both_land(tmp_path):
    """Each update reads the card, waits 0.3 s, then writes: without the lock the second overwrites the first."""
    path = write_card(tmp_path, make_card("tiny"))
    errors = []

    def add(name):
        def change(card):
            time.sleep(0.3)
            return card.model_copy(update={"metrics": {**card.metrics, name: _metric(1.0)}})
        try:
            update_card(path, change)
        except Exception as exc:  # noqa: BLE001 (reported by the assertion below)
            errors.append(exc)

    threads = [threading.Thread(target=add, args=(name,)) for name in ("elbo", "mig")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert set(parse_card(path).metrics) == {"elbo", "mig"}


@pytest.mark.parametrize("mode", [0o600, 0o640, 0o444])
def test_an_updated_card_keeps_its_permissions(tmp_path, mode):
    path = write_card(tmp_path, make_card("tiny"))
    path.chmod(mode)
    update_card(path, lambda card: card.model_copy(update={"metrics": {"elbo": _metric(1.0)}}))
    assert "elbo" in parse_card(path).metrics and path.stat().st_mode & 0o777 == mode


def test_a_command_line_of_any_bytes_is_named_by_its_lock(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["vaezoo", "train", "--out", "o\udcff"])  # b"o\xff" as Python decodes it
    path = write_card(tmp_path, make_card("tiny"))
    update_card(path, lambda card: card.model_copy(update={"metrics": {"elbo": _metric(1.0)}}))
    assert "elbo" in parse_card(path).metrics


@pytest.mark.usefixtures("data_plugin")
def test_eval_write_keeps_an_update_made_while_it_computed(cards_dir, capsys, monkeypatch):
    """`seeds --write` (or another `eval --write`) lands while `eval --write` computes: both are on the card."""
    from vaezoo.evaluation import report as eval_report

    path, _, _ = write_entry(cards_dir, make_card("tiny"))
    real = eval_report.evaluate

    def evaluate_while_another_writes(*args, **kwargs):
        update_card(path, lambda card: card.model_copy(update={"metrics": {"other": _metric(2.0)}}))
        return real(*args, **kwargs)

    monkeypatch.setattr(eval_report, "evaluate", evaluate_while_another_writes)
    code, _, err = cli(capsys, "eval", str(path), "--write")
    assert code == 0, err
    metrics = parse_card(path).metrics
    assert "other" in metrics and "reconstruction" in metrics


@pytest.mark.usefixtures("data_plugin")
def test_eval_write_keeps_a_spread_and_a_note_recorded_on_a_metric_while_it_computed(cards_dir, capsys,
                                                                                     monkeypatch):
    """`seeds --write` recorded the spread of a metric `eval --write` was measuring: eval wrote the metric over it
    from the card as it had read it, and the spread was lost, both commands saying they had written it."""
    from vaezoo.evaluation import report as eval_report

    path, _, _ = write_entry(cards_dir, make_card("tiny"))
    spread = SeedSpread(runs=[SeedRun(seed=0, value=1.0), SeedRun(seed=1, value=3.0)], n=2, median=2.0, min=1.0,
                        max=3.0, shipped=0, selection="the first seed", command="vaezoo seeds tiny runs/s1 --write")
    real = eval_report.evaluate

    def evaluate_while_seeds_writes(*args, **kwargs):
        update_card(path, lambda card: card.model_copy(update={"metrics": {"reconstruction": _metric(1.0).model_copy(
            update={"note": "seed 0 of 2", "seeds": spread})}}))
        return real(*args, **kwargs)

    monkeypatch.setattr(eval_report, "evaluate", evaluate_while_seeds_writes)
    code, _, err = cli(capsys, "eval", str(path), "--write")
    assert code == 0, err
    written = parse_card(path).metrics["reconstruction"]
    assert written.value != 1.0 and written.seeds == spread and written.note == "seed 0 of 2"


@pytest.mark.usefixtures("data_plugin")
def test_eval_write_records_the_settings_its_values_were_measured_with_over_those_written_meanwhile(
        cards_dir, capsys, monkeypatch):
    """Another `eval --write --set` recorded a metric's settings while this one measured it with its defaults: the
    value written was the defaults' and the settings left on the card the other's, so that the card's command no
    longer measured its own value."""
    from vaezoo.evaluation import report as eval_report

    path, _, _ = write_entry(cards_dir, make_card("tiny", eval_metrics=["gaussian_total_correlation"]))
    real = eval_report.evaluate

    def evaluate_while_another_sets(*args, **kwargs):
        update_card(path, lambda card: card.model_copy(update={
            "eval_settings": {"gaussian_total_correlation": {"points": 30}}}))
        return real(*args, **kwargs)

    monkeypatch.setattr(eval_report, "evaluate", evaluate_while_another_sets)
    code, _, err = cli(capsys, "eval", str(path), "--write")
    assert code == 0, err
    card = parse_card(path)
    assert card.metrics["gaussian_total_correlation"].parameters["points"] == 10_000
    assert card.eval_settings == {}


HOLD = """
import sys, time
from pathlib import Path
from vaezoo.store.locks import run_lock
with run_lock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(60)
"""


@pytest.fixture
def held_folder(tmp_path):
    """A run folder whose lock another process holds; yields ``(folder, process)``."""
    folder = tmp_path / "run"
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(folder)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "held"
        yield folder, process
    finally:
        process.kill()
        process.wait()


def test_a_second_run_into_a_held_folder_is_refused_naming_the_holder(held_folder):
    folder, process = held_folder
    with pytest.raises(VaezooError) as err:
        with locks.run_lock(folder):
            pytest.fail("entered a folder another process holds")
    text = str(err.value)
    assert "\n" not in text and f"out {folder} is in use by process {process.pid} on " in text
    assert text.endswith("wait for it to finish, or choose another out") and err.value.option == "out"
    process.send_signal(signal.SIGKILL)  # a killed holder frees the folder at once
    process.wait()
    with locks.run_lock(folder):
        assert (folder / locks.RUN_LOCK).exists()
    assert not (folder / f"{locks.RUN_LOCK}{locks.HOLDER_SUFFIX}").exists()


def test_an_ensemble_is_refused_where_another_process_holds_one_of_its_members_folders(data_plugin, tmp_path,
                                                                                        capsys):
    member = tmp_path / "out" / "seed-1"  # e.g. 'vaezoo train CARD --out out/seed-1' of its own, running
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(member)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "held"
        card = write_toml(tmp_path / "toy.toml", make_card("toy", train={"epochs": 1}))
        code, out, err = cli(capsys, "train", str(card), "--out", str(tmp_path / "out"), "--seeds", "0,1")
    finally:
        process.kill()
        process.wait()
    assert (code, out) == (1, "") and f"{member} is in use by process {process.pid}" in err.strip().splitlines()[-1]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [locks.RUN_LOCK, "seed-1"]  # no member trained


def test_run_lock_leaves_no_folder_when_nothing_was_written(tmp_path):
    with locks.run_lock(tmp_path / "a" / "b"):
        pass
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("files, name", [(["mine.toml", "mine.safetensors"], "mine"), (["mine.toml"], "other"),
                                         (["checkpoint.pt"], "mine")])
def test_convert_refuses_an_out_folder_holding_a_run(tmp_path, capsys, files, name):
    out = tmp_path / "run"
    out.mkdir()
    for f in files:
        (out / f).write_text("theirs")
    code, _, err = cli(capsys, "convert", "jointvae-original", str(tmp_path / "x.pt"), "--dataset", "mnist",
                       "--out", str(out), "--name", name)
    assert code == 1 and "Traceback" not in err
    assert f"--out {out} already holds" in err and "choose another --out" in err.strip().splitlines()[-1]
    assert sorted(p.name for p in out.iterdir()) == sorted(files)
    assert all((out / f).read_text() == "theirs" for f in files)


def test_push_staging_into_a_folder_a_run_holds_is_refused(held_folder, tmp_path, capsys):
    folder, process = held_folder
    card, _, _ = write_entry(tmp_path / "cards", make_card(name="tiny"))
    code, out, err = cli(capsys, "push", str(card), "owner/tiny", "--dry-run", "--out", str(folder))
    assert (code, out) == (1, "") and err.strip().splitlines()[-1] == (f"error: --out {folder} is not an empty "
                                                                       f"folder; give a new or empty one")
    assert sorted(p.name for p in folder.iterdir()) == [locks.RUN_LOCK, f"{locks.RUN_LOCK}{locks.HOLDER_SUFFIX}"]


def test_convert_into_a_folder_another_run_holds_is_refused(held_folder, tmp_path, capsys):
    folder, process = held_folder
    code, _, err = cli(capsys, "convert", "jointvae-original", str(tmp_path / "x.pt"), "--dataset", "mnist",
                       "--out", str(folder))
    assert code == 1 and f"is in use by process {process.pid}" in err.strip().splitlines()[-1]
    assert sorted(p.name for p in folder.iterdir()) == [locks.RUN_LOCK, f"{locks.RUN_LOCK}{locks.HOLDER_SUFFIX}"]


def test_a_card_update_waits_for_the_other_and_says_so(tmp_path, capsys):
    path = write_card(tmp_path, make_card("tiny"))
    started = threading.Event()

    def slow():
        def change(card):
            started.set()
            time.sleep(1.0)
            return card
        update_card(path, change)

    thread = threading.Thread(target=slow)
    thread.start()
    started.wait()
    update_card(path, lambda card: card)
    thread.join()
    assert f"waiting for another vaezoo process updating {path} (held by process {os.getpid()}" in \
        capsys.readouterr().err


def test_a_card_in_an_unwritable_folder_is_one_line(tmp_path, monkeypatch):
    import errno

    from kit import refuse_writes

    path = write_card(tmp_path / "cards", make_card("tiny"))
    refuse_writes(monkeypatch, tmp_path / "cards", errno.EROFS)
    with pytest.raises(OutputError, match=f"cannot write {path}: Read-only file system"):
        update_card(path, lambda card: card)


@pytest.mark.parametrize("mask,said", [(0o277, "Permission denied (the umask 277 makes the files and folders vaezoo "
                                                "creates read-only to their owner; set one such as 022 with 'umask "
                                                "022'); choose another out"),
                                       (0o077, "Permission denied; choose another out")])
def test_a_run_folder_refused_under_a_umask_that_takes_the_owners_write_permission_names_it(tmp_path, monkeypatch,
                                                                                            mask, said):
    """Under umask 277 the --out folder vaezoo made was 0500: 'Permission denied; choose another --out', and every
    other --out failed alike (the tests run as root, which the mode does not stop: the refusal is simulated)."""
    refuse_writes(monkeypatch, tmp_path / "run", errno.EACCES)
    old = os.umask(mask)
    try:
        with pytest.raises(OutputError) as refused, locks.run_lock(tmp_path / "run"):
            pass
    finally:
        os.umask(old)
    assert str(refused.value) == f"cannot write in out {tmp_path / 'run'}: {said}"


def test_a_read_only_lock_file_left_in_a_run_folder_is_named_with_the_command_that_mends_it(tmp_path, monkeypatch):
    """A run under umask 277 leaves its lock file 0400; under any umask after it the next run in the folder said
    'Permission denied; choose another --out' of a folder it can write in (the refusal is simulated: root)."""
    lock = tmp_path / "run" / locks.RUN_LOCK
    lock.parent.mkdir()
    lock.touch(mode=0o400)
    refuse_writes(monkeypatch, lock, errno.EACCES)
    with pytest.raises(OutputError) as refused, locks.run_lock(tmp_path / "run"):
        pass
    assert str(refused.value) == (f"cannot lock {tmp_path / 'run'}: its lock file {lock} is read-only; make it "
                                  f"writable with 'chmod u+w {lock}' and run again")


def test_names_given_twice_are_kept_once():
    """`eval --metrics elbo,elbo --write` records elbo once."""
    from vaezoo.cli.common import names_arg

    assert names_arg("elbo, elbo,mig,elbo") == ["elbo", "mig"]


@pytest.mark.parametrize("command", [["eval", "--write"], ["seeds", "--write"]])
def test_write_refuses_a_card_file_of_an_installed_package(tmp_path, capsys, monkeypatch, command):
    import sysconfig

    site_packages = tmp_path / "site-packages"
    path = write_card(site_packages / "vaezoo_zoo", make_card("tiny"))
    paths = sysconfig.get_paths()
    monkeypatch.setattr(sysconfig, "get_paths", lambda: {**paths, "purelib": str(site_packages)})
    before = path.read_bytes()
    verb, flag = command
    code, _, err = cli(capsys, verb, str(path), *([str(tmp_path)] if verb == "seeds" else []), flag)
    assert code == 1 and f"is a file of an installed package ({path}); copy it with its weights" in err
    assert path.read_bytes() == before and sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_write_refuses_a_card_that_pip_installed_outside_site_packages(site, tmp_path, capsys):
    """pip install --target or --user puts a package where sysconfig does not look: its RECORD says so."""
    package = tmp_path / "src" / "vaezoo_cardpkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    write_card(package / "cards", make_card("tiny"))
    install_package(site, package, "cardpkg")
    path = site / "vaezoo_cardpkg" / "cards" / "tiny-blobs.toml"
    before = path.read_bytes()
    code, _, err = cli(capsys, "eval", str(path), "--write")
    assert code == 1 and f"is a file of an installed package ({path}); copy it with its weights" in err
    assert path.read_bytes() == before


def test_write_refuses_a_card_whose_folder_takes_no_new_file_before_measuring(tmp_path, capsys, monkeypatch):
    path = write_card(tmp_path / "cards", make_card("tiny"))
    monkeypatch.setattr("vaezoo.evaluation.report.evaluate",
                        lambda *a, **k: pytest.fail("measured a card it cannot write"))
    refuse_writes(monkeypatch, tmp_path / "cards", errno.EROFS)
    code, _, err = cli(capsys, "eval", str(path), "--write")
    assert code == 1 and (f"card tiny-blobs: its folder {tmp_path / 'cards'} takes no new file (Read-only file "
                          f"system); copy the card with its weights where you can write") in err


@pytest.mark.parametrize("beside", ["lock", "holder"])
def test_write_refuses_a_folder_where_the_cards_lock_belongs_before_measuring(tmp_path, capsys, monkeypatch, beside):
    path = write_card(tmp_path / "cards", make_card("tiny"))
    lock = locks.card_lock_file(path)
    folder = lock if beside == "lock" else lock.with_name(lock.name + locks.HOLDER_SUFFIX)
    folder.mkdir()
    monkeypatch.setattr("vaezoo.evaluation.report.evaluate",
                        lambda *a, **k: pytest.fail("measured a card it cannot write"))
    code, _, err = cli(capsys, "eval", str(path), "--write")
    assert code == 1 and err.strip().splitlines()[-1] == (
        f"error: {folder} is a folder, not a file vaezoo wrote; move it away and try again")


def test_write_refuses_a_card_file_its_owner_made_read_only_before_measuring(tmp_path, capsys, monkeypatch):
    path = write_card(tmp_path / "cards", make_card("tiny"))
    path.chmod(0o444)
    before = path.read_bytes()
    monkeypatch.setattr("vaezoo.evaluation.report.evaluate",
                        lambda *a, **k: pytest.fail("measured a card it cannot write"))
    code, _, err = cli(capsys, "eval", str(path), "--write")
    assert code == 1 and err.strip().splitlines()[-1] == (
        f"error: card tiny-blobs: its file {path} is read-only; make it writable (chmod u+w) to record metrics on "
        f"it, or give the path of a copy")
    assert path.read_bytes() == before and path.stat().st_mode & 0o777 == 0o444


def test_eval_write_refuses_a_card_from_the_hub_cache(cards_dir, capsys, monkeypatch):
    """A card whose file is huggingface_hub's cached snapshot is not written, as `seeds --write` refuses it."""
    import vaezoo.entries.catalog

    path = write_card(cards_dir, make_card("tiny"))
    card = parse_card(path, source="hf-hub:me/tiny@0123")
    monkeypatch.setattr(vaezoo.entries.catalog, "get_card", lambda name: card)  # as if fetched from the Hub
    before = path.read_bytes()
    code, _, err = cli(capsys, "eval", "hf-hub:me/tiny", "--write")
    assert code == 1 and "comes from hf-hub:me/tiny@0123, not from a local card file" in err
    assert path.read_bytes() == before


@pytest.mark.parametrize("seeds", [[], ["--seeds", "0,1"]], ids=["one run", "an ensemble"])
def test_vaezoo_train_into_an_out_another_run_holds_is_refused_and_touches_nothing(held_folder, data_plugin,
                                                                                   tmp_path, capsys, seeds):
    folder, process = held_folder
    path = write_card(tmp_path / "cards", make_card("toy"))
    before = sorted(p.name for p in folder.iterdir())
    code, out, err = cli(capsys, "train", str(path), "--out", str(folder), *seeds)
    assert code == 1 and out == "" and "Traceback" not in err
    assert f"--out {folder} is in use by process {process.pid} on " in err and err.count("\n") == 1
    assert sorted(p.name for p in folder.iterdir()) == before  # no checkpoint, no seed folder


def _published_again(folder, card, seed: int) -> None:
    """Publish ``card``'s run again into ``folder`` (as ``vaezoo train --resume`` for more epochs does), with
    other weights."""
    import torch

    from vaezoo.assemble import load_model
    from vaezoo.training.publish import publish

    torch.manual_seed(seed)
    publish(card, load_model(card, pretrained=False), folder, card.name, steps=99)


def test_a_run_published_again_after_its_card_was_read_loads_the_new_card_and_weights(tmp_path, data_plugin):
    import vaezoo
    from vaezoo.assemble import load_model

    path, _, _ = write_entry(tmp_path / "run", make_card("tiny", name="mine"))
    old = parse_card(path)
    _published_again(path.parent, old, seed=1)
    model = load_model(old)  # the card read before the new weights landed; they no longer match it
    new = parse_card(path)
    assert model.card.weights == new.weights != old.weights and model.card.train.steps == 99
    assert vaezoo.load(str(path)).weights_digest == model.weights_digest


def test_a_reader_between_the_new_weights_and_the_new_card_waits_for_the_card(tmp_path, data_plugin):
    from vaezoo.assemble import load_model
    from vaezoo.entries.entry import write_entry as write_vaezoo_entry

    path, _, _ = write_entry(tmp_path / "run", make_card("tiny", name="mine"))
    old = parse_card(path)
    other = tmp_path / "other"
    _published_again(other, old, seed=1)
    new = parse_card(other / "mine.toml")
    loaded = []
    with locks.card_lock(path):  # as publish holds it: the weights are written, the card not yet
        (path.parent / "mine.safetensors").write_bytes((other / "mine.safetensors").read_bytes())
        reader = threading.Thread(target=lambda: loaded.append(load_model(old)))
        reader.start()
        time.sleep(0.5)
        assert reader.is_alive() and not loaded  # it waits for the card, instead of failing on the weights
        write_vaezoo_entry(new, (other / "mine.safetensors").read_bytes(), path.parent)
    reader.join(30)
    assert loaded and loaded[0].card.weights == parse_card(path).weights


def test_weights_that_are_not_their_cards_are_still_refused_in_a_published_folder(tmp_path, data_plugin):
    from vaezoo.assemble import load_model
    from vaezoo.errors import WeightsError

    path, _, weights = write_entry(tmp_path / "run", make_card("tiny", name="mine"))
    _published_again(path.parent, parse_card(path), seed=1)
    weights.write_bytes(weights.read_bytes()[:-1] + b"!")
    with pytest.raises(WeightsError, match="sha256"):
        load_model(parse_card(path))


def test_eval_write_on_a_run_published_again_after_its_card_was_read_writes_the_new_card(tmp_path, data_plugin):
    from vaezoo.evaluation.report import evaluate_card

    path, _, _ = write_entry(tmp_path / "run", make_card("tiny", name="mine"))
    old = parse_card(path)
    _published_again(path.parent, old, seed=1)
    report = evaluate_card(old, metrics=["elbo"], write=True)
    new = parse_card(path)
    assert report.card.weights == new.weights != old.weights and "elbo" in new.metrics


def test_a_run_folder_replaced_by_a_file_under_its_lock_lets_the_blocks_own_error_through(tmp_path):
    """A run whose --out was removed and a file made in its place stopped with 'error: Not a directory:
    OUT/.vaezoo.lock.holder', raised while the lock was released, in place of the checkpoint's own error."""
    folder = tmp_path / "run"
    with pytest.raises(OutputError, match="cannot write the checkpoint"):
        with locks.run_lock(folder):
            for path in folder.iterdir():
                path.unlink()
            folder.rmdir()
            folder.write_text("")
            raise OutputError("cannot write the checkpoint")
    with locks.run_lock(tmp_path / "gone"):
        (tmp_path / "gone" / ".vaezoo.lock.holder").unlink()
        (tmp_path / "gone" / ".vaezoo.lock").unlink()
        (tmp_path / "gone").rmdir()


def test_a_load_of_a_folder_saved_again_meanwhile_waits_for_the_save_and_reads_the_new_pair(tmp_path):
    """The second save has put its weights in place and not yet its card: the reader, told by the old card that the
    new weights are not its own, waits for the save (the folder's lock) and loads the new pair."""
    import shutil

    import torch

    import vaezoo

    first_card, _, _ = write_entry(tmp_path / "a", make_card(name="tiny"))
    second_card, _, _ = write_entry(tmp_path / "b", make_card(name="tiny"), seed=1)
    folder = tmp_path / "saved"
    vaezoo.save_pretrained(vaezoo.load(first_card), folder)
    second = vaezoo.load(second_card)
    vaezoo.save_pretrained(second, tmp_path / "saved-b")
    loaded, failed = [], []

    def load():
        try:
            loaded.append(vaezoo.load(folder))
        except VaezooError as exc:
            failed.append(exc)

    with locks.folder_lock(folder):  # the second save, under way
        shutil.copy(tmp_path / "saved-b" / "tiny.safetensors", folder / "tiny.safetensors")
        reader = threading.Thread(target=load)
        reader.start()
        reader.join(1.5)
        assert reader.is_alive()  # waiting for the save
        shutil.copy(tmp_path / "saved-b" / "tiny.toml", folder / "tiny.toml")
    reader.join(30)
    assert failed == [] and len(loaded) == 1
    assert all(torch.equal(v, second.state_dict()[k]) for k, v in loaded[0].state_dict().items())


RUN_LOCKS = """
import contextlib, resource, sys
from pathlib import Path
from vaezoo.errors import OutputError
from vaezoo.store.locks import run_lock

resource.setrlimit(resource.RLIMIT_NOFILE, (64, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
with contextlib.ExitStack() as held:
    try:
        for cell in range(100):  # as a sweep holds its runs' folders
            held.enter_context(run_lock(Path(sys.argv[1]) / f"beta={cell}" / "seed-0"))
    except OutputError as exc:
        print(exc)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_NOFILE is POSIX")
def test_a_sweep_past_the_open_files_limit_names_the_limit_not_a_lock_file(tmp_path):
    """Each run folder's lock file stays open while its run trains: 100 runs under 'ulimit -n 64' ran out of
    descriptors, and the error said the lock's holder file was 'Too many open files, not a file vaezoo wrote'."""
    done = subprocess.run([sys.executable, "-c", RUN_LOCKS, str(tmp_path)], capture_output=True, text=True,
                          timeout=120)
    said = done.stdout.strip()
    assert done.returncode == 0 and said.startswith("cannot lock "), done.stderr
    assert "Too many open files (this process may hold 64 files open" in said and "'ulimit -n'" in said
    assert "not a file vaezoo wrote" not in said and "move it away" not in said


def test_a_pair_written_up_to_a_kill_between_its_renames_is_finished_by_the_next_load(tmp_path):
    """A SIGKILL between the weights' rename and the card's left new weights beside the old card, which refused
    them (their sha256) until the entry was written again: the next load finishes the write from the card the
    writer had staged, under the writers' locks."""
    import torch

    import vaezoo

    card, _, _ = write_entry(tmp_path / "entry", make_card(name="tiny"))
    killed = run_python("-c", (
        "import os, signal, sys, torch, vaezoo\n"
        "from vaezoo.entries.entry import write_entry\n"
        "model = vaezoo.load(sys.argv[1])\n"
        "with torch.no_grad():\n"
        "    model.head.bias.add_(1.0)\n"
        "real, renames = os.replace, []\n"
        "def replace(source, target):  # killed at the second rename: the card's\n"
        "    renames.append(target)\n"
        "    if len(renames) == 2:\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    real(source, target)\n"
        "os.replace = replace\n"
        "torch.save(model.head.bias, sys.argv[3])\n"
        "write_entry(model.card, model.state_dict(), sys.argv[2])\n"), str(card), str(card.parent),
        str(tmp_path / "bias.pt"))
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert [p.name for p in card.parent.iterdir() if p.name.endswith(".tmp")]  # the staged card
    [(status, detail)] = verify_entries([parse_card(card)])  # a check writes nothing: it says what finishes it
    assert status == "FAILED" and detail.endswith("; a write of the entry was cut short between its weights and its "
                                                  "card: loading it (vaezoo.load, vaezoo eval) finishes that write")

    model = vaezoo.load(card)
    assert torch.equal(model.head.bias, torch.load(tmp_path / "bias.pt"))
    assert parse_card(card).weights == model.card.weights  # the card file holds the new pair's
    assert not [p.name for p in card.parent.iterdir() if p.name.endswith(".tmp")]
    assert verify_entries([parse_card(card)]) == [("ok", str(card.parent / "tiny.safetensors"))]


def _cut_short(tmp_path):
    """An entry ``tiny`` as a write killed between its renames leaves it: the new weights beside the old card, the new
    card staged. Returns the card's path, the new card's (in another folder) and the staged card's."""
    import shutil

    card, _, weights = write_entry(tmp_path / "entry", make_card(name="tiny"))
    new, _, _ = write_entry(tmp_path / "new", make_card(name="tiny"), seed=1)
    shutil.copy(new.with_suffix(".safetensors"), weights)
    staged = card.parent / ".tiny.toml.a1b2c3d4.tmp"
    shutil.copy(new, staged)
    return card, new, staged


@pytest.mark.parametrize("when", ["listed", "read"])
def test_a_cut_short_write_finished_by_another_load_at_the_same_time_loads(tmp_path, monkeypatch, when):
    """Two loads of an entry whose folder holds no lock file ran unguarded: the one that found the staged card gone
    (renamed by the other, once it listed it or once it read it) said the weights were not the card's, though the
    other had just made the pair whole."""
    import vaezoo
    from vaezoo.entries import entry

    card, new, staged = _cut_short(tmp_path)
    real = {"listed": entry.temporaries, "read": entry.parse_card}

    def other_load_first(path, *args):
        found = real[when](path, *args)
        if staged.exists() and (when == "listed" or path == staged):
            os.replace(staged, card)  # the other load's rename
        return found

    monkeypatch.setattr(entry, "temporaries" if when == "listed" else "parse_card", other_load_first)
    model = vaezoo.load(card)
    assert model.card.weights == parse_card(new).weights == parse_card(card).weights


@pytest.mark.parametrize("locked", [False, True], ids=["no lock file", "a run's lock file"])
def test_a_cut_short_write_that_a_read_only_folder_keeps_from_finishing_is_said_on_load(tmp_path, monkeypatch, capsys,
                                                                                        locked):
    """vaezoo verify said that loading the entry finishes the write; in a folder that refuses the rename (and the
    lock a run's folder holds the file of), the load said only that the weights were not the card's."""
    card, _, staged = _cut_short(tmp_path)
    if locked:
        (card.parent / f".{card.name}.lock").touch()
        refuse_writes(monkeypatch, card.parent, errno.EROFS)
    real = os.replace

    def replace(source, target):
        if os.path.dirname(target) == str(card.parent):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(target))
        return real(source, target)

    monkeypatch.setattr(os, "replace", replace)
    code, _, err = cli(capsys, "eval", str(card))
    assert code == 1 and "Traceback" not in err
    said = err.strip()
    assert said.startswith(f"error: {card}: a write of the entry was cut short between its weights and its card, and "
                           f"this load cannot finish it (") and "Read-only file system" in said, said
    assert said.endswith("); load it where its folder can be written, or write the entry again")
    assert staged.exists()


@pytest.mark.parametrize("kind", ["fifo", "link to /dev/zero"])
def test_a_weights_file_that_is_no_regular_file_is_refused_on_load_without_being_read(tmp_path, kind):
    """A failed load looked for a write cut short by hashing the weights file beside the card: a FIFO there blocked it
    for ever, a link to /dev/zero read without end."""
    card = write_card(tmp_path, make_card(name="tiny", weights={"file": "tiny.safetensors", "sha256": "0" * 64,
                                                                "size": 10}))
    weights = tmp_path / "tiny.safetensors"
    os.mkfifo(weights) if kind == "fifo" else weights.symlink_to("/dev/zero")
    (tmp_path / ".tiny.toml.a1b2c3d4.tmp").write_text("")  # what a write killed while it staged its card leaves
    done = run_python("-c", "import sys, vaezoo\nfrom vaezoo.errors import WeightsError\ntry:\n"
                      "    vaezoo.load(sys.argv[1])\nexcept WeightsError as exc:\n    print(exc)\n", str(card),
                      timeout=60)
    assert done.returncode == 0, done.stderr
    assert ("is not a regular file" if kind == "fifo" else "is a link to /dev/zero") in done.stdout


def test_a_card_written_after_the_kill_is_not_replaced_by_the_older_staged_card(tmp_path):
    """The card staged before a kill between the renames, renamed over a card updated since (seeds --write, say),
    dropped that update: only a staged card newer than the card's file finishes the write."""
    import shutil

    import vaezoo
    from vaezoo.errors import WeightsError

    card, _, weights = write_entry(tmp_path / "entry", make_card(name="tiny"), seed=1)
    new_card, _, new_weights = write_entry(tmp_path / "new", make_card(name="tiny"), seed=2)
    shutil.copyfile(new_weights, weights)  # what the kill left: the new weights renamed, the new card staged
    staged = card.parent / f".{card.name}.k1ll3d00.tmp"
    shutil.copyfile(new_card, staged)
    at = os.stat(staged).st_mtime
    os.utime(card, (at + 5, at + 5))  # the card written again after the kill
    with pytest.raises(WeightsError, match="not the one the card describes|does not match"):
        vaezoo.load(card)
    assert staged.exists()

    os.utime(card, (at - 5, at - 5))  # the card as the killed writer found it
    assert vaezoo.load(card).card.weights == parse_card(new_card).weights
    assert not staged.exists()
