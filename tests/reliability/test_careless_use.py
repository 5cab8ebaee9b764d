"""Careless use, as a user meets vaezoo (round 15): a card folder removed or looping in the middle of a batch, a
batch stopped with Ctrl-C, a gallery into a folder that is a loop of links, VAEZOO_HOME a file, a dataset's name
mistyped, the conformance kit given a name where it takes a model. Each is one line naming the problem."""

from __future__ import annotations

import json
import os
import shutil
import signal

import pytest
from kit import child_env, cli, make_card, run_python, write_entry, write_toml

import vaezoo.evaluation.report as report_module
from vaezoo import testing
from vaezoo.entries.catalog import get_card
from vaezoo.entries.entry import check_writable
from vaezoo.errors import CardError, InstallError, OutputError
from vaezoo.evaluation.report import evaluate_cards
from vaezoo.store.files import check_beside


@pytest.fixture
def two_runs(data_plugin, cards_dir, tmp_path):
    """Two folders each holding the tiny card with its weights: runs/a, runs/b."""
    return [write_entry(tmp_path / "runs" / name, make_card("tiny"))[0].parent for name in ("a", "b")]


def test_a_batch_names_a_card_it_cannot_read_once(two_runs, tmp_path, capsys):
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    code, _, err = cli(capsys, "eval", str(two_runs[0]), str(loop))
    assert code == 1 and "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert line.startswith(f"error: {loop}: cannot read card") and f"{loop}: {loop}:" not in line, err


def test_a_card_whose_folder_was_removed_since_it_was_read_is_said_gone(two_runs):
    card = get_card(two_runs[0])
    shutil.rmtree(two_runs[0])
    with pytest.raises(CardError, match=r"its folder .*/runs/a is gone \(moved or removed since the card was read\); "
                                        r"nothing was written") as caught:
        check_writable(card)
    assert "copy the card" not in str(caught.value)


def test_a_ctrl_c_while_the_cards_folder_is_checked_leaves_no_file_there(two_runs, monkeypatch):
    """The check that the folder takes a new file (before a card is measured) left its hidden probe file
    (.NAME.toml.XXXXXXXX.tmp) when a Ctrl-C or SIGTERM struck between making and removing it."""
    card = get_card(two_runs[0])
    close = os.close

    def interrupted(fd):
        os.kill(os.getpid(), signal.SIGINT)
        sum(range(100))  # the handler runs here, before the file is closed and removed
        return close(fd)

    monkeypatch.setattr(os, "close", interrupted)
    with pytest.raises(KeyboardInterrupt):
        check_writable(card)
    monkeypatch.undo()
    assert sorted(p.name for p in two_runs[0].iterdir() if p.name.endswith(".tmp")) == []


def test_an_interrupted_batch_says_which_cards_it_wrote(two_runs, monkeypatch, capsys):
    evaluate, calls = report_module._evaluate, []

    def ctrl_c_on_the_second(*args, **kwargs):
        calls.append(args)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return evaluate(*args, **kwargs)

    monkeypatch.setattr(report_module, "_evaluate", ctrl_c_on_the_second)
    with pytest.raises(KeyboardInterrupt):
        evaluate_cards([str(folder) for folder in two_runs], write=True)
    a, b = map(str, two_runs)
    assert f"interrupted: 1 of 2 runs written ({a}); not written: {b}; run the command again" in capsys.readouterr().err


def test_a_gallery_into_a_loop_of_links_names_the_folder(cards, tmp_path, capsys):
    loop = tmp_path / "gloop"
    loop.symlink_to(loop)
    code, _, err = cli(capsys, "gallery", str(loop), "--no-data")
    assert code == 1 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == (f"error: cannot use the folder {loop}: Too many levels of symbolic links; "
                                            f"choose another folder"), err
    with pytest.raises(OutputError, match=r"^cannot use the folder .*gloop: Too many levels"):
        check_beside(loop / ".x.lock")


def test_test_images_not_kept_under_a_vaezoo_home_that_is_a_file_are_said_in_words(two_runs, tmp_path, monkeypatch,
                                                                                   capsys):
    from vaezoo.extras.gallery import _cached_test_images

    home = tmp_path / "home"
    home.write_text("mine\n")
    monkeypatch.setenv("VAEZOO_HOME", str(home))
    images = _cached_test_images(get_card(two_runs[0]), None, 0, "key")
    err = capsys.readouterr().err
    assert images.shape[0] > 0 and home.read_text() == "mine\n"
    assert (f"are not kept for the next run: cannot write in {home}/test-images: {home} is a file, not a folder; "
            f"set VAEZOO_HOME to a folder you can write to") in err and "Errno" not in err, err


@pytest.mark.parametrize("given", ["TINY_BLOBS", "tiny_blob"])
def test_a_mistyped_dataset_of_the_leaderboard_gets_the_close_name(cards, given, capsys):
    write_toml(cards / "t.toml", make_card("tiny"))
    code, _, err = cli(capsys, "leaderboard", "elbo", "--dataset", given)
    assert code == 1
    assert err.strip().splitlines()[-1] == (f"error: no card is of dataset '{given}' (did you mean tiny_blobs?); "
                                            f"the zoo's datasets: tiny_blobs"), err


@pytest.mark.parametrize("given", [None, "vae", 3])
def test_check_model_of_what_is_no_model_is_a_type_error(given):
    with pytest.raises(TypeError, match=r"^check_model checks a built vaezoo model \(vaezoo.load or "
                                        r"vaezoo.build_model gives one\), not \w+; check a card with check_card"):
        testing.check_model(given)


WHOLE = "is a whole number of images, e.g. 4, not"


@pytest.mark.parametrize("batch, error, said", [(0, ValueError, "is at least 1 image, got 0"),
                                                 ("4", TypeError, f"{WHOLE} str '4'"),
                                                 (True, TypeError, f"{WHOLE} bool True")])
def test_the_kit_s_batch_is_refused_before_anything_is_built(batch, error, said):
    # check_net(batch=0) said 'no finite gradient reaches its input'; check_model(batch="4") ended in torch's TypeError
    for check, call in (("check_net", lambda: testing.check_net("mlp_encoder", batch=batch)),
                        ("check_latent_family", lambda: testing.check_latent_family("gaussian", batch=batch, dim=2)),
                        ("check_card", lambda: testing.check_card("jointvae-mnist", batch=batch))):
        with pytest.raises(error, match=f"^{check}'s batch= {said}"):
            call()


def test_check_plugin_of_what_is_no_name_and_check_dataset_given_a_split_say_what_they_take():
    # check_plugin(None) said plugin 'None' is not installed; a split reached the dataset's info() twice
    with pytest.raises(TypeError, match=r"^check_plugin takes a plugin's name .*, not NoneType None$"):
        testing.check_plugin(None)
    with pytest.raises(testing.ConformanceError, match="check_dataset checks both splits, 'train' and 'test', "
                                                       "itself; give the dataset's options without split"):
        testing.check_dataset("synthetic", split="test")


def test_a_registry_of_a_kind_starting_with_a_vowel_says_an():
    with pytest.raises(TypeError, match=r"^an architecture is named by a string, e\.g\. '\w+', got NoneType$"):
        testing.check_architecture(None)


def test_a_metric_named_in_the_wrong_case_gets_its_name(two_runs, capsys):
    code, _, err = cli(capsys, "eval", str(two_runs[0]), "--metrics", "ELBO")
    assert code == 1
    assert err.strip().splitlines()[-1].startswith("error: unknown metric 'ELBO'. Did you mean 'elbo'? Known: "), err


@pytest.mark.parametrize(("option", "given", "meant"), [("--dataset", "TINY_BLOBS", "tiny_blobs"),
                                                        ("--dataset", "tiny_blob", "tiny_blobs"),
                                                        ("--arch", "VAE", "vae")])
def test_a_mistyped_filter_of_list_gets_the_close_name(cards, option, given, meant, capsys):
    write_toml(cards / "t.toml", make_card("tiny"))
    code, _, err = cli(capsys, "list", option, given)
    assert code == 1
    assert err.strip().splitlines()[-1] == (f"error: {option} {given}: no card has it (did you mean {meant}?); the "
                                            f"cards have {meant}"), err


@pytest.mark.parametrize("made", ["nothing", "a file", "a folder without a project"])
def test_an_editable_install_of_no_project_is_refused_before_pip_runs(made, tmp_path, monkeypatch, capsys):
    import vaezoo.extras.installer as installer

    monkeypatch.setattr(installer, "_run_pip", lambda *args: pytest.fail("pip ran"))
    path = tmp_path / "proj"
    if made == "a file":
        path.write_text("x\n")
    elif made != "nothing":
        path.mkdir()
    said = {"nothing": "does not exist", "a file": "is not a folder",
            "a folder without a project": "is not a Python project: it holds no pyproject.toml or setup.py"}[made]
    code, _, err = cli(capsys, "install", "-e", str(path))
    assert code == 1 and err.strip().splitlines() == [f"error: --editable {path} {said}; give the folder " + (
        "holding the project's pyproject.toml" if made.startswith("a folder") else
        "of a Python project (the one holding its pyproject.toml)")], err
    with pytest.raises(InstallError, match=f"^editable {path} {said}"):
        installer.install(editable=str(path))


def test_a_script_without_a_main_guard_runs_once_when_the_metrics_fit_on_worker_processes(tmp_path):
    script = tmp_path / "mine.py"
    script.write_text("import operator\n"
                      "from vaezoo.metrics.parallel import process_map\n"
                      "print('top level ran', flush=True)\n"
                      "print(process_map(operator.add, [(1, 2), (3, 4)], jobs=2), flush=True)\n")
    done = run_python(str(script), env=child_env(tmp_path / "home"), timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["top level ran", "[3, 7]"], done.stdout + done.stderr


@pytest.mark.parametrize(("options", "said", "code"), [
    (["-o", "{tmp}/x.jpg"], "images are written as PNG; give a .png file name, not '{tmp}/x.jpg'", 1),
    (["-o", "{tmp}/taken.png"], "cannot write {tmp}/taken.png: it is a folder, not a file; choose another output path",
     1),
    (["-o", "{tmp}/x.png", "--scale", "0"], "--scale must be at least 1, got 0", 2),
    (["-o", "{tmp}/a-file/x.png"], "cannot write {tmp}/a-file/x.png: {tmp}/a-file is a file, not a folder; choose "
                                   "another output path", 1),
    (["-o", "{tmp}/new/" + "x" * 300 + ".png"], "cannot write {tmp}/new/" + "x" * 300 + ".png: its name is 304 "
                                                "bytes, more than the 241 a file name may have there; choose another "
                                                "output path", 1)],
    ids=["jpg", "folder", "scale-0", "a-file-as-folder", "long-name"])
def test_show_refuses_what_it_cannot_write_before_the_model_is_loaded(two_runs, tmp_path, monkeypatch, capsys,
                                                                       options, said, code):
    (tmp_path / "taken.png").mkdir()
    (tmp_path / "a-file").write_text("", encoding="utf-8")
    loaded = []
    monkeypatch.setattr("vaezoo.assemble.load_model", lambda *args, **kwargs: loaded.append(args))
    got, _, err = cli(capsys, "show", str(two_runs[0]), "sample", *(o.format(tmp=tmp_path) for o in options))
    assert got == code and err.strip().splitlines() == [f"error: {said.format(tmp=tmp_path)}"], err
    assert loaded == [] and not (tmp_path / "x.png").exists() and not (tmp_path / "x.jpg").exists()


@pytest.mark.parametrize("command, option", [(["list"], "--dataset"), (["list"], "--arch"), (["list"], "--latent"),
                                             (["leaderboard", "accuracy"], "--dataset")])
@pytest.mark.parametrize("given", ["", " "])
def test_an_empty_filter_of_a_listing_is_refused_not_taken_for_no_filter(cards, command, option, given, capsys):
    write_toml(cards / "t.toml", make_card("tiny"))
    code, out, err = cli(capsys, *command, option, given)
    assert code == 2 and out == ""
    assert err.strip().splitlines()[-1] == (f"vaezoo {command[0]}: error: argument {option}: give a name, not an "
                                            f"empty string")


@pytest.mark.parametrize(("given", "written"), [("0-200", "0-200"), ("0-200,300,5,6", "0-200,300,5,6"),
                                                ("4,5,6,1,2", "4-6,1,2"), ("7", "7")])
def test_the_printed_resume_command_writes_a_range_of_seeds_as_a_range(given, written):
    # --seeds 0-200 was printed back as the 201 numbers, a line of 800 characters
    from argparse import Namespace

    from vaezoo.cli.train import resume_command, seeds_arg

    command = resume_command(Namespace(card="c.toml", out="runs/x", seeds=seeds_arg(given), max_steps=3), until=None)
    assert command.endswith(f" train c.toml --out runs/x --seeds {written} --resume"), command
    assert seeds_arg(written) == seeds_arg(given)


@pytest.mark.parametrize("given", ["betas=[0.9,0.999]", "betas=[0.9, 0.999]", "betas = [ 0.9 , 0.999 ]"])
def test_list_where_reads_an_array_as_sweep_writes_it(cards, given, capsys):
    # only str() of the card's list, '[0.9, 0.999]', matched: '--sweep betas=[0.9,0.999]' spells it without a space
    write_toml(cards / "t.toml", make_card("tiny", train={"optimizer": {"name": "Adam", "lr": 1e-3,
                                                                        "options": {"betas": [0.9, 0.999]}}}))
    code, out, err = cli(capsys, "list", "--where", given, "--json")
    assert code == 0 and [entry["name"] for entry in json.loads(out)] == ["tiny-blobs"], err
    code, out, _ = cli(capsys, "list", "--where", "betas=[0.9,0.99]", "--json")
    assert code == 0 and json.loads(out) == []


def test_a_card_s_sha256_in_capitals_is_the_same_digest(tmp_path, capsys):
    # a digest copied from PowerShell's Get-FileHash (capitals) was refused as not matching the pattern
    path, state, _ = write_entry(tmp_path / "mine", make_card(name="mine"), seed=3)
    text = path.read_text(encoding="utf-8")
    digest = get_card(path).weights.sha256
    path.write_text(text.replace(digest, digest.upper()), encoding="utf-8")
    assert get_card(path).weights.sha256 == digest
    code, out, err = cli(capsys, "verify", str(path))
    assert code == 0 and "ok" in out, err


def test_a_vaezoo_data_that_is_a_file_is_said_so_before_anything_is_read(tmp_path, monkeypatch, capsys):
    # it was read as the data folder: MNIST's files were reported missing under it
    setting = tmp_path / "version"
    setting.write_text("not a folder\n", encoding="utf-8")
    monkeypatch.setenv("VAEZOO_DATA", str(setting))
    code, out, err = cli(capsys, "eval", "jointvae-mnist")
    assert (code, out) == (1, "")
    assert err.strip().splitlines() == [f"error: VAEZOO_DATA {setting} is a file, not a folder; set it to the folder "
                                        f"holding the datasets, or unset it to use the default data folder"]

