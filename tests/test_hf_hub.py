"""The Hugging Face Hub, against a stand-in on 127.0.0.1 (tests/hubserver.py), never the real Hub.

huggingface_hub reads HF_ENDPOINT, HF_HOME and HF_HUB_OFFLINE when it is imported, so everything that talks
to the stand-in runs in a fresh interpreter with those set, as a user's would.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import tomllib
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from hubserver import FakeHub, serve_hub
from kit import (cli, entries, install_plugin, make_card, refuse_writes, run_python, run_vaezoo, weights_entry,
                 write_card, write_entry)
from pydantic import ValidationError

from vaezoo.cli import main
from vaezoo.entries.catalog import MAX_CARD_BYTES, get_card
from vaezoo.entries.entry import fetch
from vaezoo.entries.schema import Card, Weights
from vaezoo.errors import CardError, OutputError, VaezooError, WeightsError
from vaezoo.extras.hub_card import model_card
from vaezoo.terminal import shell_join

REPO_ID = "owner/tiny"
STAGED = ["tiny.toml", "tiny.safetensors", "config.json", "README.md"]  # what vaezoo push uploads, in order
STAGED_ALL = [name for name in STAGED if not name.endswith(".safetensors")]  # push --all stages no weights
METRIC = {"value": 0.8873, "command": "vaezoo eval tiny --check", "vaezoo_version": "0.1.0"}

# Loads each NAME of argv (pairs NAME EXPECTED.safetensors) and prints whether its weights are the file's.
LOAD = """
import sys, torch, vaezoo
from safetensors.torch import load_file
from vaezoo.errors import VaezooError
for name, expected in zip(sys.argv[1::2], sys.argv[2::2]):
    try:
        model = vaezoo.load(name)
    except VaezooError as exc:
        print(f"{type(exc).__name__}: {exc}")
        continue
    want, got = load_file(expected), model.state_dict()
    print(want.keys() == got.keys() and all(torch.equal(got[k], want[k]) for k in want), model.card.source)
"""


def load(*pairs: str, env: dict[str, str] | None = None) -> list[str]:
    """The lines :data:`LOAD` prints for ``pairs``."""
    result = run_python("-c", LOAD, *pairs, env=env)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def one_error_line(result: subprocess.CompletedProcess, code: int = 1) -> str:
    """The single line a failed command printed on stderr, after checking it failed with ``code`` (2: the command
    line alone is wrong) and no traceback."""
    assert result.returncode == code, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


@pytest.fixture
def hub(monkeypatch, tmp_path):
    """The stand-in Hub, and the environment that points huggingface_hub (in child processes) at it."""
    for name in ("HF_TOKEN", "HF_HUB_OFFLINE", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "VAEZOO_CARDS_PATH"):
        monkeypatch.delenv(name, raising=False)
    with serve_hub(FakeHub()) as running:
        monkeypatch.setenv("HF_ENDPOINT", running.endpoint)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
        monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
        monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        yield running


def entry(directory: Path, seed: int = 0, name: str = "tiny") -> tuple[Path, Path]:
    """A tiny zoo entry made here: ``(card, weights)`` files side by side."""
    card, _, weights = write_entry(directory, make_card(name=name), seed=seed)
    return card, weights


def as_repo(card: Path, weights: Path) -> dict[str, bytes]:
    """A Hub repository's files holding one card and its weights at the root."""
    return {"README.md": b"# tiny\n", card.name: card.read_bytes(), weights.name: weights.read_bytes()}


@pytest.mark.slow
def test_a_hub_model_loads_at_the_revision_asked_for(hub, tmp_path):
    card1, weights1 = entry(tmp_path / "v1", seed=1)
    card2, weights2 = entry(tmp_path / "v2", seed=2)
    first = hub.commit(REPO_ID, as_repo(card1, weights1))
    hub.tag(REPO_ID, "v1", first)
    latest = hub.commit(REPO_ID, as_repo(card2, weights2))
    url_card = write_card(tmp_path / "elsewhere", make_card(
        name="tiny-url", weights=weights_entry(weights1, url=f"hf://{REPO_ID}@v1/{weights1.name}")))

    lines = load(f"hf-hub:{REPO_ID}@v1", str(weights1), f"hf-hub:{REPO_ID}", str(weights2),
                 f"hf-hub:{REPO_ID}@{first}", str(weights1), str(url_card), str(weights1))
    assert lines == [f"True hf-hub:{REPO_ID}@{first}", f"True hf-hub:{REPO_ID}@{latest}",
                     f"True hf-hub:{REPO_ID}@{first}", "True None"]

    info = run_vaezoo("info", f"hf-hub:{REPO_ID}@v1")
    assert info.returncode == 0, info.stderr
    header = info.stdout.splitlines()[:2]
    assert header[1] == f"# source: hf-hub:{REPO_ID}@{first}"  # the tag, resolved to its commit
    assert Path(header[0].removeprefix("# ")).parent.name == first
    assert tomllib.loads(info.stdout)["weights"]["sha256"] == hashlib.sha256(weights1.read_bytes()).hexdigest()


def tampered(data: bytes) -> bytes:
    """``data`` with its last byte changed: same size, another sha256."""
    return data[:-1] + bytes([data[-1] ^ 1])


@pytest.mark.slow
def test_weights_that_are_not_the_cards_are_refused(hub, tmp_path):
    card, weights = entry(tmp_path)
    size = weights.stat().st_size
    same_size = hub.commit("owner/same-size", {**as_repo(card, weights), weights.name: tampered(weights.read_bytes())})
    longer = hub.commit("owner/longer", {**as_repo(card, weights), weights.name: weights.read_bytes() + b"\0" * 8})
    url_card = write_card(tmp_path / "elsewhere", make_card(
        name="tiny-url", weights=weights_entry(weights, url=f"hf://owner/same-size@{same_size}/{weights.name}")))

    lines = load("hf-hub:owner/same-size", str(weights), str(url_card), str(weights), "hf-hub:owner/longer",
                 str(weights))
    assert lines[0].startswith("WeightsError: ") and f"does not match the card's {weights_entry(weights)['sha256']}" \
        in lines[0]
    assert lines[1] == lines[0]  # the hf:// URL names the same file: the same refusal
    assert lines[2] == (f"WeightsError: the Hub announces {size + 8} bytes for owner/longer@{longer}/{weights.name} "
                        f"but the card says {size}; refusing it")
    assert hub.downloads("owner/longer", weights.name) == 0  # refused before downloading
    assert hub.downloads("owner/same-size", weights.name) == 2  # once by each load that named it, no retry


@pytest.mark.slow
def test_a_load_of_a_cached_hub_model_asks_the_hub_once(hub, tmp_path):
    card, weights = entry(tmp_path)
    commit = hub.commit(REPO_ID, as_repo(card, weights))
    asked = []
    for _ in range(2):  # the first load fills the cache; the second asks only for main's commit
        asked.append(len(hub.requests))
        assert load(f"hf-hub:{REPO_ID}", str(weights)) == [f"True hf-hub:{REPO_ID}@{commit}"]
    assert len(hub.requests) - asked[1] == 1  # the listing that checks the root's cards gives the commit too


@pytest.mark.slow
def test_offline_mode_is_served_from_the_cache(hub, tmp_path):
    card, weights = entry(tmp_path)
    commit = hub.commit(REPO_ID, as_repo(card, weights))
    assert load(f"hf-hub:{REPO_ID}", str(weights)) == [f"True hf-hub:{REPO_ID}@{commit}"]
    asked = len(hub.requests)

    offline = {**os.environ, "HF_HUB_OFFLINE": "1"}
    assert load(f"hf-hub:{REPO_ID}", str(weights), env=offline) == [f"True hf-hub:{REPO_ID}@{commit}"]
    info = run_vaezoo("info", f"hf-hub:{REPO_ID}", env=offline)
    assert info.stdout.splitlines()[1] == f"# source: hf-hub:{REPO_ID}@{commit}"  # main, at its cached commit
    assert len(hub.requests) == asked

    hub.commit("owner/never-fetched", as_repo(card, weights))
    error = one_error_line(run_vaezoo("info", "hf-hub:owner/never-fetched", env=offline))
    assert error == ("error: cannot fetch the card of hf-hub:owner/never-fetched: HF_HUB_OFFLINE is set and it is "
                     "not in huggingface_hub's cache; unset HF_HUB_OFFLINE to download it")
    assert len(hub.requests) == asked


@pytest.mark.slow
def test_push_then_load_back(hub, tmp_path, monkeypatch):
    cards = tmp_path / "cards"
    _, weights = entry(cards)
    write_card(cards, make_card(name="tiny-metrics", metrics={"accuracy": METRIC}, headline="accuracy",
                                weights=weights_entry(weights)))
    monkeypatch.setenv("VAEZOO_CARDS_PATH", str(cards))

    pushed = run_vaezoo("push", "tiny", "owner/pushed")
    assert pushed.returncode == 0, pushed.stderr
    commit = hub.repos["owner/pushed"].refs["main"]
    assert pushed.stdout == f"hf-hub:owner/pushed@{commit}\n"
    files = hub.files("owner/pushed")
    assert sorted(files) == [".gitattributes", "README.md", "config.json", "tiny.safetensors", "tiny.toml"]
    assert files["tiny.safetensors"] == weights.read_bytes()
    assert tomllib.loads(files["tiny.toml"].decode())["weights"] == weights_entry(weights)  # file = beside the card
    front = yaml.safe_load(files["README.md"].decode().split("---\n")[1])
    assert front["library_name"] == "vaezoo" and front["license"] == "mit" and front["datasets"] == ["mnist"]
    assert load("hf-hub:owner/pushed", str(weights)) == [f"True hf-hub:owner/pushed@{commit}"]

    # Pushing another card to the repository replaces the first: a repository holds one card.
    again = run_vaezoo("push", "tiny-metrics", "owner/pushed")
    assert again.returncode == 0, again.stderr
    files = hub.files("owner/pushed")
    assert sorted(files) == [".gitattributes", "README.md", "config.json", "tiny-metrics.safetensors",
                             "tiny-metrics.toml"]
    info = run_vaezoo("info", "hf-hub:owner/pushed")
    on_hub = {**METRIC, "command": "vaezoo eval hf-hub:owner/pushed --check"}  # the repository, not a path here
    assert tomllib.loads(info.stdout)["metrics"] == {"accuracy": on_hub}


@pytest.mark.slow
def test_a_push_the_hub_refuses_is_a_one_line_error(hub, tmp_path):
    card, _ = entry(tmp_path / "cards")
    hub.read_only = True
    error = one_error_line(run_vaezoo("push", str(card), "owner/locked"))
    assert error == (f"error: cannot push 'tiny' to owner/locked: the Hub at {hub.endpoint} refused it (HTTP 401): "
                     f"log in with a token allowed to do it ('hf auth login' or HF_TOKEN)")
    assert hub.repos == {}


@pytest.mark.slow
def test_a_push_to_a_hub_that_cannot_be_reached_says_so_in_one_line(tmp_path, monkeypatch):
    """Its request failed with the transport's bare words ('[Errno -2] Name or service not known'), where a load
    said that the Hub cannot be reached and what to check."""
    card, _ = entry(tmp_path / "cards")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: nothing listens
    error = one_error_line(run_vaezoo("push", str(card), "owner/unreached"))
    assert error.startswith("error: cannot push 'tiny' to owner/unreached: the Hub at http://127.0.0.1:9 cannot be "
                            "reached (")
    assert error.endswith("); check the network (or HF_ENDPOINT)")


@pytest.mark.slow
def test_push_commits_to_the_branch_with_the_message_asked_for(hub, tmp_path):
    card, weights = entry(tmp_path / "cards")
    first = run_vaezoo("push", str(card), "owner/branched")
    assert first.returncode == 0, first.stderr
    main_commit = hub.repos["owner/branched"].refs["main"]

    pushed = run_vaezoo("push", str(card), "owner/branched", "--revision", "trial", "-m", "retrained, seed 3")
    assert pushed.returncode == 0, pushed.stderr
    repo = hub.repos["owner/branched"]
    assert repo.refs["main"] == main_commit  # main untouched
    assert repo.messages[repo.refs["trial"]] == "retrained, seed 3"
    assert repo.messages[main_commit] == "vaezoo push tiny"
    assert pushed.stdout == f"hf-hub:owner/branched@{repo.refs['trial']}\n"
    assert load("hf-hub:owner/branched@trial", str(weights)) == [f"True hf-hub:owner/branched@{repo.refs['trial']}"]

    again = run_vaezoo("push", str(card), "owner/branched", "--revision", "trial")  # the branch exists now
    assert again.returncode == 0, again.stderr
    assert repo.messages[repo.refs["trial"]] == "vaezoo push tiny"
    assert one_error_line(run_vaezoo("push", str(card), "owner/branched", "--revision", "x", "--dry-run"), 2) == (
        "error: --commit-message and --revision go with an upload; --dry-run commits nothing")
    pushed = len(repo.commits)
    assert one_error_line(run_vaezoo("push", str(card), "owner/branched", "--revision", main_commit)) == (
        f"error: branch '{main_commit}' is named as a commit is (40 hexadecimal digits): loading it, huggingface_hub "
        f"would take it for a commit; choose another branch name")  # it made such a branch
    assert len(repo.commits) == pushed and sorted(repo.refs) == ["main", "trial"]


# push_to_hub and hub_push.push of the card argv[1], each printing its error
PUSH_OFFLINE = """
import sys, vaezoo
from vaezoo.entries.catalog import get_card
from vaezoo.errors import VaezooError
from vaezoo.extras.hub_push import push
for call in (lambda: vaezoo.push_to_hub(vaezoo.load(sys.argv[1]), "owner/x"), lambda: push(get_card(sys.argv[1]),
                                                                                            "owner/x")):
    try:
        call()
    except VaezooError as exc:
        print(f"{type(exc).__name__}: {exc}")
"""


@pytest.mark.parametrize("setting, said", [("VAEZOO_OFFLINE", "VAEZOO_OFFLINE=1"),
                                           ("HF_HUB_OFFLINE", "HF_HUB_OFFLINE is set")])
def test_a_push_offline_is_refused_before_any_request_and_before_anything_is_staged(hub, tmp_path, setting, said):
    card, _ = entry(tmp_path / "cards")
    temporary, out = tmp_path / "tmp", tmp_path / "out"
    temporary.mkdir()
    offline = {**os.environ, setting: "1", "TMPDIR": str(temporary), "HF_TOKEN": "hf_write"}
    refused = f"cannot push 'tiny' to owner/x: {said}, and a push needs the Hub; unset {setting} to push"

    error = one_error_line(run_vaezoo("push", str(card), "owner/x", "--out", str(out), env=offline))
    assert error == f"error: {refused} (--dry-run writes the files without the network)"
    result = run_python("-c", PUSH_OFFLINE, str(card), env=offline)
    assert result.stdout.splitlines() == [
        f"OutputError: {refused} (vaezoo.save_pretrained writes the files without the network)",
        f"OutputError: {refused} ('vaezoo push --dry-run' writes the files without the network)"], result.stderr
    assert hub.requests == [] and hub.repos == {}
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "hf_home") == ["cards", "tmp"]  # no --out, no lock
    assert list(temporary.iterdir()) == []

    staged = run_vaezoo("push", str(card), "owner/x", "--dry-run", "--out", str(out), env=offline)
    assert staged.returncode == 0, staged.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(STAGED)


@pytest.mark.slow
def test_push_dry_run_writes_the_folder_and_uploads_nothing(hub, tmp_path):
    card, weights = entry(tmp_path / "cards")
    out = tmp_path / "upload"
    result = run_vaezoo("push", str(card), "owner/dry", "--dry-run", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [str(out / name) for name in STAGED]
    assert sorted(p.name for p in out.iterdir()) == sorted(STAGED)  # no lock file: the folder is uploaded whole
    assert (out / "tiny.safetensors").read_bytes() == weights.read_bytes()
    assert get_card(out).weights == Weights(**weights_entry(weights))  # the folder is a card folder
    assert hub.requests == []

    temporary = run_vaezoo("push", str(card), "owner/dry", "--dry-run")
    assert temporary.returncode == 0, temporary.stderr
    folder = Path(temporary.stdout.splitlines()[0]).parent
    assert folder != out and sorted(p.name for p in folder.iterdir()) == sorted(STAGED)
    assert str(folder) in temporary.stderr

    error = one_error_line(run_vaezoo("push", str(card), "owner/dry", "--dry-run", "--out", str(out)))
    assert error == f"error: --out {out} is not an empty folder; give a new or empty one"
    assert hub.requests == []


def test_what_a_part_prints_while_push_builds_the_model_goes_to_stderr(tmp_path, capsys, monkeypatch):
    """A chatty architecture's line stood on stdout among the staged files' paths, which a script reads."""
    import vaezoo.assemble

    card, _ = entry(tmp_path / "cards")
    build = vaezoo.assemble.build_aside
    monkeypatch.setattr(vaezoo.assemble, "build_aside", lambda *a, **k: print("chatty") or build(*a, **k))
    out = tmp_path / "upload"
    code, stdout, stderr = cli(capsys, "push", str(card), "owner/dry", "--dry-run", "--out", str(out))
    assert (code, stdout.splitlines()) == (0, [str(out / name) for name in STAGED])
    assert stderr.startswith("chatty\n")


def test_a_dry_run_that_fails_leaves_no_folder_in_the_temporary_folder(tmp_path, capsys, monkeypatch):
    """Without --out a dry run stages into a new folder of the temporary folder, and names it once the files are
    staged; one that failed (weights that do not match the card) left that folder there, named nowhere."""
    card, weights = entry(tmp_path / "cards")
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temporary))
    code, stdout, stderr = cli(capsys, "push", str(card), "owner/dry", "--dry-run")
    assert code == 1 and stdout == "" and "does not match the card's" in stderr
    assert list(temporary.iterdir()) == []


@pytest.mark.parametrize("case", ["no repository", "no revision", "no card", "two cards", "no Hub", "bad name"])
def test_a_hub_model_that_cannot_be_had_is_a_one_line_error(hub, tmp_path, monkeypatch, case):
    card, weights = entry(tmp_path)
    hub.commit("owner/readme-only", {"README.md": b"# nothing\n", "sub/tiny.toml": card.read_bytes()})
    hub.commit("owner/two", {**as_repo(card, weights), "second.toml": card.read_bytes()})
    hub.commit(REPO_ID, as_repo(card, weights))
    if case == "no Hub":
        monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: nothing listens
    name, expected = {
        "no repository": ("hf-hub:owner/missing", "no such repository on http://127.0.0.1:"),
        "no revision": (f"hf-hub:{REPO_ID}@v9", "the repository has no such revision (branch, tag or commit)"),
        "no card": ("hf-hub:owner/readme-only", "must hold exactly one vaezoo card at its root, found no *.toml file"),
        "two cards": ("hf-hub:owner/two", "exactly one vaezoo card at its root, found second.toml, tiny.toml"),
        "no Hub": (f"hf-hub:{REPO_ID}", "the Hub at http://127.0.0.1:9 cannot be reached"),
        "bad name": ("hf-hub:tiny", "'hf-hub:tiny' is not a Hub model; write hf-hub:OWNER/REPO"),
    }[case]
    assert expected in one_error_line(run_vaezoo("info", name))


@pytest.mark.parametrize("listed", ["its size", "a card's size"])
def test_a_hub_card_larger_than_a_card_may_be_is_refused_from_the_listing_before_its_download(hub, tmp_path, listed):
    card, weights = entry(tmp_path)
    large = card.read_bytes() + b"#" * MAX_CARD_BYTES
    commit = hub.commit(REPO_ID, {**as_repo(card, weights), card.name: large})
    if listed == "a card's size":  # a Hub whose listing lies: the card is still refused, once downloaded
        hub.listed_sizes[card.name] = card.stat().st_size

    error = one_error_line(run_vaezoo("info", f"hf-hub:{REPO_ID}"))
    if listed == "its size":
        assert error == (f"error: hf-hub:{REPO_ID}: the Hub lists its card {card.name} at {len(large):,} bytes, more "
                         f"than the {MAX_CARD_BYTES:,} a card may have; it is not a card file (commit {commit})")
        assert hub.downloads(REPO_ID, card.name) == 0
    else:
        assert error.endswith(f"{card.name}: is {len(large):,} bytes, more than the {MAX_CARD_BYTES:,} a card may "
                              f"have; it is not a card file")
        assert hub.downloads(REPO_ID, card.name) == 1


def test_a_hub_root_of_many_cards_is_refused_from_the_listing_naming_the_first_ones(hub, tmp_path):
    card, weights = entry(tmp_path)
    cards = {f"c{i:02}.toml": card.read_bytes() for i in range(12)}
    commit = hub.commit(REPO_ID, {**as_repo(card, weights), **cards})
    error = one_error_line(run_vaezoo("info", f"hf-hub:{REPO_ID}"))
    assert error == (f"error: hf-hub:{REPO_ID} must hold exactly one vaezoo card at its root, found 13 *.toml files: "
                     f"{', '.join(sorted(cards)[:10])} and 3 more (commit {commit})")
    assert not any(hub.downloads(REPO_ID, name) for name in [*cards, card.name])


@pytest.mark.parametrize("weights_file", ["missing.safetensors", "../tiny.safetensors"])
def test_weights_a_hub_card_names_but_cannot_have_are_a_one_line_failure(hub, tmp_path, weights_file):
    card, weights = entry(tmp_path)
    named = card.read_text().replace(f'file = "{weights.name}"', f'file = "{weights_file}"')
    hub.commit(REPO_ID, {"tiny.toml": named.encode(), weights.name: weights.read_bytes()})
    result = run_vaezoo("verify", f"hf-hub:{REPO_ID}")
    assert result.returncode == 1
    expected = ("the repository has no such file at that revision" if weights_file == "missing.safetensors"
                else "weights path '../tiny.safetensors' leaves its Hub repository")
    assert result.stdout.startswith("tiny: FAILED ") and expected in result.stdout
    assert len(result.stdout.splitlines()) == 1


def test_without_huggingface_hub_the_hub_is_a_one_line_error_naming_the_extra(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # as if it were not installed
    card, weights = entry(tmp_path / "cards")
    install = 'install it with pip install "vaezoo[hub]"'

    assert main(["info", "hf-hub:owner/tiny"]) == 1
    assert capsys.readouterr().err == (f"error: 'hf-hub:owner/tiny' (a Hugging Face Hub repository) needs "
                                       f"huggingface_hub, which is not installed; {install}\n")
    assert main(["push", str(card), "owner/tiny", "--dry-run", "--out", str(tmp_path / "out")]) == 1
    assert capsys.readouterr().err == f"error: vaezoo push needs huggingface_hub, which is not installed; {install}\n"
    assert not (tmp_path / "out").exists()
    url_card = Card.model_validate({**tomllib.loads(card.read_text()),
                                    "weights": weights_entry(weights, url=f"hf://owner/tiny/{weights.name}")})
    with pytest.raises(WeightsError, match=r"^weights on the Hugging Face Hub \(owner/tiny/tiny.safetensors\) needs"):
        fetch(url_card)


@pytest.mark.parametrize("url, valid", [
    ("hf://owner/repo/tiny.safetensors", True),
    ("hf://owner/repo@v1/weights/tiny.safetensors", True),
    ("hf://owner/repo@refs%2Fpr%2F1/tiny.safetensors", True),
    ("hf://owner/tiny.safetensors", False),  # no repository name
    ("hf://owner/repo@/tiny.safetensors", False),
    ("hf://owner/repo/", False),
])
def test_hf_urls_in_a_card_are_checked_when_it_is_read(url, valid):
    entry_ = {"url": url, "sha256": "0" * 64, "size": 1}
    if valid:
        assert Weights(**entry_).url == url
    else:
        with pytest.raises(ValidationError, match="is not hf://OWNER/REPO/PATH"):
            Weights(**entry_)


@pytest.mark.parametrize("licence, metadata", [
    ("MIT", {"license": "mit"}),
    ("Apache-2.0", {"license": "apache-2.0"}),
    ("Research only, v2", {"license": "other", "license_name": "research-only-v2"}),
])
def test_the_hub_model_card_carries_the_cards_metadata_and_metrics(tmp_path, licence, metadata):
    card, _ = entry(tmp_path)
    other = {"value": 146.971218, "command": "vaezoo eval tiny", "vaezoo_version": "0.1.0"}
    vaezoo_card = Card.model_validate({**tomllib.loads(card.read_text()), "license": licence,
                                       "summary": "a | b *not bold*", "metrics": {"accuracy": METRIC, "nll": other}})
    readme = model_card(vaezoo_card, "owner/tiny")
    front = yaml.safe_load(readme.split("---\n")[1])
    assert {k: front[k] for k in metadata} == metadata
    assert front["library_name"] == "vaezoo" and front["datasets"] == ["mnist"]
    assert {"vaezoo", "vae"} <= set(front["tags"])
    [index] = front["model-index"]
    assert index["name"] == "tiny"
    [result] = index["results"]
    assert result["dataset"]["name"] == "mnist"
    assert {m["type"]: m["value"] for m in result["metrics"]} == {"accuracy": 0.8873, "nll": 146.971218}
    assert "| accuracy | 0.8873 | vaezoo eval tiny --check |" in readme  # each number beside its command
    assert "a \\| b \\*not bold\\*" in readme  # card text shows as written
    assert 'vaezoo.load("hf-hub:owner/tiny")' in readme


@pytest.mark.parametrize("text", ["~~struck~~ out", "- a list item", "+ a list item", "1. an ordered item",
                                  "2) an ordered item", "---", "    indented like code", "=== a <b>tag</b> & *x*"])
def test_the_hub_model_card_shows_card_text_as_written_where_markdown_would_format_it(tmp_path, text):
    """GitHub-flavoured Markdown, as the Hub renders it: the summary '- a list item' was a list, '~~struck~~' struck
    through (here and in a metric's note, in the table), '    indented' a code block."""
    from markdown_it import MarkdownIt

    card, _ = entry(tmp_path)
    metric = {**METRIC, "note": text}
    vaezoo_card = Card.model_validate({**tomllib.loads(card.read_text()), "summary": text, "metrics": {"m": metric}})
    body = model_card(vaezoo_card, "owner/tiny").split("---\n", 2)[2]
    tokens = MarkdownIt("commonmark").enable(["table", "strikethrough"]).parse(body)
    opened = [i for i, token in enumerate(tokens) if token.level == 0 and token.nesting == 1]
    assert [tokens[i].type for i in opened[:3]] == ["heading_open", "paragraph_open", "paragraph_open"]
    cells = [t for t, before in zip(tokens[1:], tokens) if before.type == "td_open"]
    for inline in (tokens[opened[1] + 1], cells[-1]):  # the summary (after the name), the note
        assert [child.type for child in inline.children] == ["text"]
        assert inline.children[0].content == text.lstrip(" ")


def test_the_hub_model_card_metadata_shows_a_metric_name_holding_control_characters_as_text(tmp_path):
    """A hand-edited card's metric name went raw into the model-index: U+202E (which reverses the text after it) as
    itself, ESC as YAML's \\e, which the Hub reads back as ESC."""
    card, _ = entry(tmp_path)
    names = ["acc\u202eycarucca", "red\x1b[31m", "two\nlines\a"]
    vaezoo_card = Card.model_validate({**tomllib.loads(card.read_text()), "metrics": dict.fromkeys(names, METRIC)})
    readme = model_card(vaezoo_card, "owner/tiny")
    assert all(c.isprintable() or c == "\n" for c in readme)
    [index] = yaml.safe_load(readme.split("---\n")[1])["model-index"]
    [result] = index["results"]
    shown = ["acc\\u202eycarucca", "red\\x1b[31m", "two\\nlines\\x07"]
    assert [(m["type"], m["name"]) for m in result["metrics"]] == [(name, name) for name in shown]


def test_a_dry_run_onto_a_full_disk_names_the_file_in_out_not_in_its_hidden_staging_folder(
        tmp_path, monkeypatch, capsys):
    """The error named DIR/.upload.XXXXXXXX.tmp/config.json, a folder removed as the push stopped."""
    import errno

    card, _ = entry(tmp_path / "cards")
    out = tmp_path / "upload"
    written = Path.write_bytes

    def write_bytes(self, data):
        if self.name.startswith(".config.json."):  # atomic_write's temporary file of config.json
            raise OSError(errno.ENOSPC, "No space left on device")
        return written(self, data)

    monkeypatch.setattr(Path, "write_bytes", write_bytes)
    assert main(["push", str(card), "owner/dry", "--dry-run", "--out", str(out)]) == 1
    assert capsys.readouterr().err == (f"error: cannot write {out / 'config.json'}: No space left on device; choose "
                                       f"another output path\n")
    assert not out.exists() and [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


@pytest.mark.slow
def test_a_tampered_file_in_the_hub_cache_loaded_offline_is_reported_as_tampered(hub, tmp_path):
    card, weights = entry(tmp_path)
    commit = hub.commit(REPO_ID, as_repo(card, weights))
    assert load(f"hf-hub:{REPO_ID}", str(weights)) == [f"True hf-hub:{REPO_ID}@{commit}"]
    blob = next(p for p in (tmp_path / "hf_home").rglob(weights.name) if p.is_file()).resolve()
    original = blob.read_bytes()
    blob.write_bytes(tampered(original))
    asked = len(hub.requests)

    offline = {**os.environ, "HF_HUB_OFFLINE": "1"}
    [line] = load(f"hf-hub:{REPO_ID}", str(weights), env=offline)
    sha = weights_entry(weights)["sha256"]
    assert line.startswith("WeightsError: ") and f"does not match the card's {sha}" in line
    assert "huggingface_hub's cache" in line and "not in huggingface_hub's cache" not in line
    assert "HF_HUB_OFFLINE" in line  # why it was not downloaded again
    error = one_error_line(run_vaezoo("eval", f"hf-hub:{REPO_ID}", "--metrics", "elbo", env=offline))
    assert f"does not match the card's {sha}" in error
    assert len(hub.requests) == asked  # offline: the Hub was never asked
    assert blob.read_bytes() == tampered(original)  # the cached file is reported, not deleted

    online = load(f"hf-hub:{REPO_ID}", str(weights))  # online, a fresh copy replaces the damaged one
    assert online == [f"True hf-hub:{REPO_ID}@{commit}"]


SPREAD = {"runs": [{"seed": 0, "value": 0.8873}, {"seed": 1, "value": 0.91}, {"seed": 2, "value": 0.85}], "n": 3,
          "median": 0.8873, "min": 0.85, "max": 0.91, "shipped": 0, "selection": "the recipe's seed",
          "command": "vaezoo seeds tiny runs/s1 runs/s2 --write"}


def test_push_writes_config_json_and_a_model_card_with_links_tags_and_the_seed_spread(tmp_path, capsys):
    _, weights = entry(tmp_path / "cards")
    card = write_card(tmp_path / "cards", make_card(
        name="tiny", metrics={"accuracy": {**METRIC, "seeds": SPREAD}}, weights=weights_entry(weights),
        paper="Dupont (2018), Joint VAE, NeurIPS. https://arxiv.org/abs/1804.00104; code: https://github.com/x/y."))
    out = tmp_path / "upload"
    assert main(["push", str(card), "owner/tiny", "--dry-run", "--out", str(out)]) == 0
    capsys.readouterr()
    config = json.loads((out / "config.json").read_text())
    assert config["library_name"] == "vaezoo" and config["architecture"] == "vae" and config["name"] == "tiny"
    assert config["latent"]["layout"] == "gaussian(3) + categorical(4)" and config["latent"]["code_size"] == 7
    assert config["input"] == {"dataset": "mnist", "image_size": 16, "channels": 1, "range": [0.0, 1.0]}
    assert config["weights"] == weights_entry(weights) and config["card"] == "tiny.toml"
    assert config["plugins"] == {}  # the built-in plugins come with vaezoo

    readme = (out / "README.md").read_text()
    front = yaml.safe_load(readme.split("---\n")[1])
    assert {"vaezoo", "vae", "gaussian", "categorical", "arxiv:1804.00104"} <= set(front["tags"])
    assert "- <https://arxiv.org/abs/1804.00104>\n- <https://github.com/x/y>\n" in readme
    assert "| accuracy | 3 | 0.8873 | 0.85 | 0.91 | 0: 0.8873, 1: 0.91, 2: 0.85 | 0 (the recipe's seed) |" in readme
    assert "Made by `vaezoo seeds tiny runs/s1 runs/s2 --write`." in readme
    # the command beside each number names the repository, which a Hub user has, not the card's path here
    assert tomllib.loads((out / "tiny.toml").read_text())["metrics"]["accuracy"]["command"] == (
        "vaezoo eval hf-hub:owner/tiny --check")


@pytest.mark.parametrize("root", ["/home/me/data", "/home/me/my data", "/home/me/it's\x1bhere"])
def test_a_pushed_card_s_commands_name_no_data_folder_of_the_machine_that_measured_it(tmp_path, capsys, root):
    _, weights = entry(tmp_path / "cards")
    measured = shell_join(["vaezoo", "eval", "runs/x", "--data-root", root, "--metrics", "accuracy"])
    card = write_card(tmp_path / "cards", make_card(
        name="tiny", metrics={"accuracy": {**METRIC, "command": measured}}, weights=weights_entry(weights)))
    out = tmp_path / "upload"
    assert main(["push", str(card), "owner/tiny", "--dry-run", "--out", str(out)]) == 0
    capsys.readouterr()
    # a Hub user has the repository and a data folder of their own (--data-root or VAEZOO_DATA), not that one
    assert tomllib.loads((out / "tiny.toml").read_text())["metrics"]["accuracy"]["command"] == (
        "vaezoo eval hf-hub:owner/tiny --metrics accuracy")


WIDE_PLUGIN = """
import vaezoo


@vaezoo.hookimpl
def vaezoo_register_nets(register):
    from vaezoo.nets import ConvEncoder

    class WideEncoder(ConvEncoder):
        pass

    register("wide_encoder", WideEncoder)
"""


def test_a_model_made_with_a_third_party_plugin_names_its_distribution_on_the_hub(site, tmp_path, capsys):
    plugin = install_plugin(site, "wide", WIDE_PLUGIN, version="2.1")
    wide = make_card(name="wide")
    wide["model"]["encoder"]["type"] = "wide_encoder"
    card, _, _ = write_entry(tmp_path / "cards", wide)
    out = tmp_path / "upload"
    assert main(["push", str(card), "owner/wide", "--dry-run", "--out", str(out)]) == 0
    capsys.readouterr()
    assert json.loads((out / "config.json").read_text())["plugins"] == {plugin: "2.1"}
    readme = (out / "README.md").read_text()
    assert f'pip install "vaezoo[hub]" {plugin}\n' in readme
    assert f"It needs the vaezoo plugin `{plugin}` (made with `2.1`)." in readme


@pytest.mark.slow
def test_push_all_dry_run_stages_the_zoo_as_a_collection(tmp_path):
    cards = tmp_path / "cards"
    entry(cards, name="tiny-a")
    entry(cards, name="tiny-b", seed=1)
    write_card(cards, make_card(name="tiny-untrained"))
    env = {**os.environ, "VAEZOO_CARDS_PATH": str(cards), "VAEZOO_LOAD_PLUGINS": "core"}  # the zoo's cards left out
    out = tmp_path / "zoo"
    result = run_vaezoo("push", "--all", "owner", "--dry-run", "--out", str(out), env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [str(out / "collection.json"), str(out / "manifest.json")] + [
        str(out / name / file.replace("tiny", name)) for name in ("tiny-a", "tiny-b") for file in STAGED_ALL]
    collection = json.loads((out / "collection.json").read_text())
    assert collection["namespace"] == "owner" and collection["title"]
    assert [(i["item_id"], i["item_type"], i["folder"]) for i in collection["items"]] == [
        ("owner/tiny-a", "model", "tiny-a"), ("owner/tiny-b", "model", "tiny-b")]
    assert get_card(out / "tiny-b").name == "tiny-b"  # each folder is a card folder
    assert 'vaezoo.load("hf-hub:owner/tiny-a")' in (out / "tiny-a" / "README.md").read_text()

    for argv, message in ((["--all", "owner"], "--all stages the zoo with --dry-run only"),
                          (["tiny-a", "--all", "owner", "--dry-run"], "give no CARD or OWNER/REPO with it"),
                          (["tiny-a"], "give CARD and OWNER/REPO")):
        assert message in one_error_line(run_vaezoo("push", *argv, env=env), 2)  # the command line alone is wrong


def test_push_all_dry_run_copies_no_weights_and_its_manifest_is_what_each_push_uploads(cards, tmp_path, capsys,
                                                                                       monkeypatch):
    """The staged zoo held a copy of every weights file (tens of MB): it holds none, and no link to one either
    (an edit of the staged folder would reach the installed file); its manifest gives the files an upload sends."""
    installed = {name: entry(cards, name=name, seed=seed)[1] for seed, name in enumerate(("tiny-a", "tiny-b"))}
    before = {name: path.read_bytes() for name, path in installed.items()}
    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", "core")
    out = tmp_path / "zoo"
    code, _, stderr = cli(capsys, "push", "--all", "owner", "--dry-run", "--out", str(out))
    assert code == 0, stderr
    staged = [path for path in out.rglob("*") if not path.is_dir()]
    assert not [path for path in staged if path.suffix == ".safetensors" or path.is_symlink()
                or path.stat().st_nlink > 1]
    assert sum(path.stat().st_size for path in staged) < min(path.stat().st_size for path in installed.values())
    assert f"{out / 'manifest.json'} gives every file each repository would receive" in stderr

    manifest = json.loads((out / "manifest.json").read_text())
    assert list(manifest) == ["owner/tiny-a", "owner/tiny-b"]
    for name, weights in installed.items():
        repository = manifest[f"owner/{name}"]
        assert (repository["folder"], repository["push"]) == (name, f"vaezoo push {name} owner/{name}")
        single = tmp_path / f"single-{name}"  # what 'vaezoo push NAME owner/NAME' stages and uploads
        assert cli(capsys, "push", name, f"owner/{name}", "--dry-run", "--out", str(single))[0] == 0
        assert [{k: v for k, v in f.items() if k != "source"} for f in repository["files"]] == [
            {"path": path.name, "size": path.stat().st_size, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
            for path in (single / file.replace("tiny", name) for file in STAGED)]
        assert repository["files"][1]["source"] == str(weights.resolve())
        assert (out / name / f"{name}.toml").read_bytes() == (single / f"{name}.toml").read_bytes()

    code, _, stderr = cli(capsys, "push", str(out / "tiny-a"), "owner/tiny-a")  # a staged folder: refused, safely
    assert code == 1 and stderr.count("\n") == 1 and "tiny-a.safetensors does not exist" in stderr
    assert {name: path.read_bytes() for name, path in installed.items()} == before


def test_push_all_reads_the_zoo_once_to_name_each_entry_in_its_push_command(cards, tmp_path, capsys, monkeypatch):
    """Each entry's push command names it as the zoo finds it: the card folders were read again for every entry,
    a cost that grew as the entries times the cards (10 s of the 34 s that 1,000 cards took)."""
    from vaezoo.entries import catalog

    for seed, name in enumerate(("tiny-a", "tiny-b", "tiny-c")):
        entry(cards, name=name, seed=seed)
    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", "core")
    scans = []
    scan = catalog._scan
    monkeypatch.setattr(catalog, "_scan", lambda: scans.append(1) or scan())
    code, _, stderr = cli(capsys, "push", "--all", "owner", "--dry-run", "--out", str(tmp_path / "zoo"))
    assert code == 0, stderr
    manifest = json.loads((tmp_path / "zoo" / "manifest.json").read_text())
    assert [repository["push"] for repository in manifest.values()] == [
        f"vaezoo push {name} owner/{name}" for name in ("tiny-a", "tiny-b", "tiny-c")]
    assert len(scans) == 2  # the cards listed, then every command named: not one read per entry

def interrupt_readme(monkeypatch, after: int = 0) -> None:
    """Ctrl-C while the README.md after the first ``after`` is made: the weights and config.json are written."""
    from vaezoo.extras import hub_push as hf_push

    made = []

    def model_card(*args):
        made.append(args)
        if len(made) > after:
            raise KeyboardInterrupt
        return original(*args)

    original = hf_push.model_card
    monkeypatch.setattr(hf_push, "model_card", model_card)


@pytest.mark.parametrize("existing", [False, True], ids=["new out", "empty out"])
@pytest.mark.parametrize("dry_run", [["--dry-run"], []], ids=["dry run", "push"])
def test_an_interrupted_push_leaves_its_out_folder_as_it_was(tmp_path, capsys, monkeypatch, existing, dry_run):
    card, weights = entry(tmp_path / "cards")
    out = tmp_path / "upload"
    if existing:
        out.mkdir()
    with monkeypatch.context() as patched:
        interrupt_readme(patched)
        assert cli(capsys, "push", str(card), "owner/tiny", *dry_run, "--out", str(out)) == (130, "",
                                                                                            "error: interrupted\n")
    assert (entries(out) == []) if existing else not out.exists()
    assert entries(tmp_path) == ["cards", "upload"][:1 + existing]  # no staging left

    code, stdout, stderr = cli(capsys, "push", str(card), "owner/tiny", "--dry-run", "--out", str(out))
    assert code == 0, stderr
    assert stdout.splitlines() == [str(out / name) for name in STAGED] and entries(out) == sorted(STAGED)
    assert get_card(out).weights == Weights(**weights_entry(weights))
    assert cli(capsys, "push", str(card), "owner/tiny", "--dry-run", "--out", str(out)) == (
        1, "", f"error: --out {out} is not an empty folder; give a new or empty one\n")


@pytest.mark.parametrize(("repo", "problem"), [
    ("me/x--y", "Cannot have -- or .. in repo_id"),
    ("me/..x", "The name cannot start or end with '-' or '.' and the maximum length is 96"),
    ("me/repo.git", "Repo_id cannot end by '.git'"),
    ("me/\u00fcn\u00ef", "Repo id must use alphanumeric chars, '-', '_' or '.'"),
    ("me/" + "a" * 200, "the maximum length is 96"),
])
def test_push_dry_run_refuses_a_repository_the_hub_would_refuse_and_writes_nothing(tmp_path, capsys, repo, problem):
    # the dry run said "would upload to me/x--y", the push then failed: "Cannot have -- or .. in repo_id"
    card, _ = entry(tmp_path / "cards")
    out = tmp_path / "upload"
    code, stdout, stderr = cli(capsys, "push", str(card), repo, "--dry-run", "--out", str(out))
    assert (code, stdout) == (1, "")
    assert stderr.startswith(f"error: the Hub takes no repository named {repo} (") and problem in stderr
    assert stderr.endswith("); choose another OWNER/REPO\n") and len(stderr.splitlines()) == 1
    assert entries(tmp_path) == ["cards"]
    assert cli(capsys, "push", str(card), "me/x-y.z_1", "--dry-run", "--out", str(out))[0] == 0


def test_push_all_dry_run_refuses_an_owner_and_skips_a_card_the_hub_would_refuse(cards, tmp_path, capsys,
                                                                               monkeypatch):
    entry(cards, name="tiny-a")
    entry(cards, name="tiny.git", seed=1)
    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", "core")
    assert cli(capsys, "push", "--all", "me--you", "--dry-run", "--out", str(tmp_path / "zoo")) == (
        1, "", "error: the Hub takes no user or organisation named me--you (Cannot have -- or .. in repo_id); "
               "choose another OWNER\n")
    code, stdout, stderr = cli(capsys, "push", "--all", "owner", "--dry-run", "--out", str(tmp_path / "zoo"))
    assert code == 0, stderr
    assert f"push --all: card tiny.git ({cards / 'tiny.git.toml'}) skipped: the Hub takes no repository named " \
           f"owner/tiny.git (Repo_id cannot end by '.git'); rename the card to stage it\n" in stderr
    assert list(json.loads((tmp_path / "zoo" / "manifest.json").read_text())) == ["owner/tiny-a"]


def test_push_out_that_cannot_be_written_names_the_folder_not_a_temporary_one(tmp_path, capsys):
    # 'push ... --dry-run -o ro/x' said "Permission denied: ro/.x.jxfj_q45.tmp", a name vaezoo made
    card, _ = entry(tmp_path / "cards")
    (tmp_path / "afile").write_text("mine")
    assert cli(capsys, "push", str(card), "me/repo", "--dry-run", "--out", str(tmp_path / "afile" / "x")) == (
        1, "", f"error: cannot write --out {tmp_path / 'afile' / 'x'}: {tmp_path / 'afile'} is a file, not a "
               f"folder; choose a folder you can write in\n")
    read_only = tmp_path / "ro"
    read_only.mkdir(mode=0o555)
    unprivileged = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search,-fowner,-chown", "--"] \
        if os.geteuid() == 0 else []  # root writes in a read-only folder unless it gives up these capabilities
    result = subprocess.run([*unprivileged, sys.executable, "-m", "vaezoo", "push", str(card), "me/repo", "--dry-run",
                             "-o", str(read_only / "x")], capture_output=True, text=True, timeout=300, check=False)
    assert (result.returncode, result.stdout, result.stderr) == (
        1, "", f"error: cannot write --out {read_only / 'x'}: Permission denied; choose a folder you can write in\n")
    assert entries(read_only) == []


def test_push_out_is_staged_beside_and_moved_in_whole_so_a_killed_staging_blocks_no_rerun(tmp_path, capsys,
                                                                                           monkeypatch):
    """A SIGKILL mid-staging left a card and weights in --out without config.json or README.md: the folder
    loaded as a model and its rerun was refused as not empty."""
    from vaezoo.extras import hub_push as hf_push

    card, _ = entry(tmp_path / "cards")
    out = tmp_path / "upload"
    (tmp_path / ".upload.k1ll3d00.tmp").mkdir()  # what a killed staging leaves: a hidden folder beside --out
    (tmp_path / ".upload.k1ll3d00.tmp" / "tiny.toml").write_text("half")
    seen, original = [], hf_push.model_card

    def model_card(*args):
        seen.append(out.exists())  # while the README is made, the card and weights are staged
        return original(*args)

    monkeypatch.setattr(hf_push, "model_card", model_card)
    code, stdout, stderr = cli(capsys, "push", str(card), "owner/tiny", "--dry-run", "--out", str(out))
    assert code == 0, stderr
    assert seen == [False] and stdout.splitlines() == [str(out / name) for name in STAGED]
    assert sorted(p.name for p in out.iterdir()) == sorted(STAGED) and entries(tmp_path) == ["cards", "upload"]


def test_an_interrupted_push_all_leaves_no_collection(cards, tmp_path, capsys, monkeypatch):
    entry(cards, name="tiny-a")
    entry(cards, name="tiny-b", seed=1)
    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", "core")
    out = tmp_path / "zoo"
    with monkeypatch.context() as patched:
        interrupt_readme(patched, after=1)  # tiny-a is staged whole, tiny-b without README.md
        assert cli(capsys, "push", "--all", "owner", "--dry-run", "--out", f"{out}/") == (130, "",
                                                                                          "error: interrupted\n")
    assert entries(tmp_path) == ["cards"]

    code, stdout, stderr = cli(capsys, "push", "--all", "owner", "--dry-run", "--out", f"{out}/")
    assert code == 0, stderr
    assert stdout.splitlines() == [str(out / "collection.json"), str(out / "manifest.json")] + [
        str(out / name / file.replace("tiny", name)) for name in ("tiny-a", "tiny-b") for file in STAGED_ALL]
    assert entries(out) == ["collection.json", "manifest.json", "tiny-a", "tiny-b"]
    for name in ("tiny-a", "tiny-b"):
        assert entries(out / name) == sorted(file.replace("tiny", name) for file in STAGED_ALL)
        assert get_card(out / name).name == name


def test_save_pretrained_writes_a_folder_that_loads_back(tmp_path):
    import torch

    import vaezoo

    card, weights = entry(tmp_path / "cards")
    metric_card = write_card(tmp_path / "cards", make_card(name="tiny", metrics={"accuracy": METRIC},
                                                           headline="accuracy", weights=weights_entry(weights)))
    model = vaezoo.load(metric_card)
    files = vaezoo.save_pretrained(model, tmp_path / "saved", repo_id="owner/tiny")
    assert [f.name for f in files] == STAGED
    assert (tmp_path / "saved" / "tiny.safetensors").read_bytes() == weights.read_bytes()  # the card's own file
    on_hub = {"accuracy": model.card.metrics["accuracy"].model_copy(
        update={"command": "vaezoo eval hf-hub:owner/tiny --check"})}  # the repository's folder: it names it
    for again in (vaezoo.load(tmp_path / "saved"), vaezoo.from_pretrained(str(tmp_path / "saved"))):
        assert again.card.metrics == on_hub
        assert all(torch.equal(a, b) for a, b in zip(again.state_dict().values(), model.state_dict().values()))

    with torch.no_grad():
        model.head.bias.add_(1.0)  # fine-tuned: other weights than those the metrics were measured on
    vaezoo.save_pretrained(model, tmp_path / "tuned")
    tuned = vaezoo.from_pretrained(str(tmp_path / "tuned"))
    assert torch.equal(tuned.head.bias, model.head.bias)
    assert tuned.card.metrics == {} and tuned.card.headline is None
    assert tuned.card.weights.sha256 != weights_entry(weights)["sha256"]
    assert 'vaezoo.from_pretrained("OWNER/REPO"' in (tmp_path / "tuned" / "README.md").read_text()

    other = vaezoo.load(card)
    other.card = other.card.model_copy(update={"name": "other"})
    with pytest.raises(VaezooError, match="already holds tiny.toml; a model's folder holds no TOML file but its card"):
        vaezoo.save_pretrained(other, tmp_path / "saved")


def test_save_pretrained_removes_the_temporary_files_a_killed_save_left_in_its_folder(tmp_path):
    """A save killed once its files were staged left their temporary files in the folder (a whole copy of the
    weights among them), which the next save kept, and an upload of the folder would have sent."""
    import vaezoo

    card, _ = entry(tmp_path / "cards")
    killed = run_python(
        "-c", "import os, signal, sys, vaezoo\n"
        "os.replace = lambda *args: os.kill(os.getpid(), signal.SIGKILL)  # at the first rename\n"
        "vaezoo.save_pretrained(vaezoo.load(sys.argv[1]), sys.argv[2])\n", str(card), str(tmp_path / "saved"))
    assert killed.returncode == -9, killed.stderr
    assert [p.name for p in (tmp_path / "saved").iterdir() if p.name.endswith(".tmp")]  # what the killed save left
    vaezoo.save_pretrained(vaezoo.load(card), tmp_path / "saved")
    assert sorted(p.name for p in (tmp_path / "saved").iterdir()) == sorted(STAGED)


def test_save_pretrained_leaves_torch_random_stream_as_it_was(tmp_path):
    import torch

    import vaezoo

    card, _ = entry(tmp_path / "cards")
    model = vaezoo.load(card)
    torch.manual_seed(123)
    expected = torch.rand(4)
    torch.manual_seed(123)
    vaezoo.save_pretrained(model, tmp_path / "saved")  # its config.json reads the latent's layout off a built model
    assert torch.equal(torch.rand(4), expected)


def test_from_pretrained_reads_the_folder_even_where_its_name_is_a_zoo_name(tmp_path, monkeypatch):
    """As documented (and as huggingface_hub does): a folder that exists by that name is read, not the zoo entry."""
    import warnings

    import torch

    import vaezoo

    model = vaezoo.load("jointvae-mnist")
    with torch.no_grad():
        model.head.bias.add_(1.0)
    monkeypatch.chdir(tmp_path)
    vaezoo.save_pretrained(model, "jointvae-mnist")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = vaezoo.from_pretrained("jointvae-mnist")
    assert torch.equal(again.head.bias, model.head.bias)


def test_from_pretrained_refuses_two_revisions_instead_of_dropping_the_one_in_the_name(monkeypatch):
    import vaezoo

    monkeypatch.setattr("vaezoo.hub.load", lambda *a, **k: pytest.fail("loaded at one of two revisions"))
    with pytest.raises(OutputError, match=r"two revisions were given, 'v1' in the name 'hf-hub:owner/repo@v1' and "
                                          r"revision='main'; give one"):
        vaezoo.from_pretrained("hf-hub:owner/repo@v1", revision="main")


def test_from_pretrained_takes_a_repository_at_a_revision_as_the_hub_name_writes_it(monkeypatch, tmp_path):
    """'owner/repo@v1' was refused ('no such file or folder; ... write hf-hub:owner/repo@v1'), and with revision=
    it was said to be no Hub repository; a folder of that name here is still read."""
    import vaezoo

    asked = []
    monkeypatch.setattr("vaezoo.hub.load", lambda name, **options: asked.append(str(name)))
    vaezoo.from_pretrained("owner/repo@v1")
    vaezoo.from_pretrained("owner/repo@v1", revision="v1")
    with pytest.raises(OutputError, match=r"two revisions were given, 'v1' in the name 'owner/repo@v1' and "
                                          r"revision='main'; give one"):
        vaezoo.from_pretrained("owner/repo@v1", revision="main")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "owner" / "repo@v1").mkdir(parents=True)
    vaezoo.from_pretrained("owner/repo@v1")
    assert asked == ["hf-hub:owner/repo@v1", "hf-hub:owner/repo@v1", "owner/repo@v1"]


@pytest.mark.parametrize("option, value, takes", [
    ("revision", 5, r"revision as a branch, tag or commit \(a string\), not int"),  # was 'no such revision'
    ("cache_dir", 5, r"cache_dir as a folder \(a string or a path\), not int"),  # was os.fspath's TypeError
    ("token", 5, r"token as a Hub token \(a string\), True or False, not int"),  # was taken
    ("force_download", "yes", "force_download as True or False, not str"),
    ("local_files_only", None, "local_files_only as True or False, not NoneType"),
])
def test_from_pretrained_refuses_a_hub_option_of_another_type(monkeypatch, option, value, takes):
    import vaezoo

    monkeypatch.setattr("vaezoo.hub.load", lambda *args, **kwargs: pytest.fail("loaded"))
    with pytest.raises(TypeError, match=rf"^from_pretrained takes {takes}$"):
        vaezoo.from_pretrained("owner/repo", **{option: value})


def test_from_pretrained_takes_numpy_and_torch_truth_values_as_bools(monkeypatch):
    """np.True_ and a 0-d bool tensor are True (they were refused as 'not bool_' and 'not Tensor')."""
    import numpy as np
    import torch

    import vaezoo
    from vaezoo.entries import huggingface

    seen = []
    monkeypatch.setattr("vaezoo.hub.load", lambda *args, **kwargs: seen.append(huggingface._DOWNLOAD.get()))
    vaezoo.from_pretrained("owner/repo", force_download=np.True_, local_files_only=torch.tensor(False),
                           token=np.False_)
    assert [(o.force_download, o.local_files_only, o.token) for o in seen] == [(True, False, False)]
    assert all(type(value) is bool for value in (seen[0].force_download, seen[0].local_files_only, seen[0].token))


def test_the_hub_api_given_no_model_or_name_says_what_it_takes(tmp_path):
    """save_pretrained(None) and of a torch module said 'this model has no card (it was built from parts)';
    from_pretrained(None) was os.fspath's bare TypeError."""
    import torch

    import vaezoo

    for model, kind in ((None, "NoneType"), (torch.nn.Linear(2, 2), "Linear")):
        with pytest.raises(TypeError, match=rf"^save_pretrained saves a vaezoo model \(vaezoo.load or "
                                            rf"vaezoo.build_model gives one\), not {kind}$"):
            vaezoo.save_pretrained(model, tmp_path / "saved")
    with pytest.raises(TypeError, match=r"^a model is named by a string or a path .*, not by NoneType$"):
        vaezoo.from_pretrained(None)
    assert not (tmp_path / "saved").exists()


def test_save_and_push_take_a_model_compiled_or_wrapped_in_data_parallel(tmp_path, monkeypatch):
    """push_to_hub(torch.compile(model)) said it takes a vaezoo model, 'not OptimizedModule', where save_pretrained
    took it, and both refused DataParallel(model): they take the model out, as timm's unwrap_model does."""
    import torch

    import vaezoo

    card, _ = entry(tmp_path / "cards")
    model = vaezoo.load(card)
    for i, wrapped in enumerate((torch.nn.DataParallel(model), torch.compile(torch.nn.DataParallel(model)))):
        vaezoo.save_pretrained(wrapped, tmp_path / f"saved{i}")
        assert torch.equal(vaezoo.load(tmp_path / f"saved{i}").head.weight, model.head.weight)
    uploaded = []
    monkeypatch.setattr("vaezoo.extras.hub_push.upload",
                        lambda files, repo_id, *rest: uploaded.append((sorted(p.name for p in files), repo_id)))
    vaezoo.push_to_hub(torch.compile(model), "owner/tiny")
    assert uploaded == [(sorted(STAGED), "owner/tiny")]


def test_a_folder_under_the_home_folder_is_saved_and_loaded_there(tmp_path, monkeypatch):
    """save_pretrained(model, '~/mine') made a folder named '~' in the current folder (and load('~/mine') read it)."""
    import vaezoo

    model = vaezoo.load(entry(tmp_path / "cards")[0])
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    vaezoo.save_pretrained(model, "~/mine")
    assert (tmp_path / "home" / "mine" / "tiny.toml").is_file() and not (tmp_path / "~").exists()
    for loaded in (vaezoo.load("~/mine"), vaezoo.from_pretrained("~/mine"), vaezoo.load("~/mine/tiny.toml")):
        assert loaded.card.path == tmp_path / "home" / "mine" / "tiny.toml"


def test_save_and_push_say_what_names_the_folder_or_repository(tmp_path):
    """save_pretrained(model, None) was os.fspath's bare TypeError; push_to_hub(model, None) 'argument of type
    'NoneType' is not iterable'."""
    import vaezoo

    model = vaezoo.load(entry(tmp_path / "cards")[0])
    with pytest.raises(TypeError, match=r"^save_pretrained writes into a folder, a string or a path, not NoneType$"):
        vaezoo.save_pretrained(model, None)
    with pytest.raises(TypeError, match=r"^push_to_hub takes the repository 'OWNER/REPO', a string, not NoneType$"):
        vaezoo.push_to_hub(model, None)


@pytest.mark.parametrize("name", ["../escape", "a/b", "My Model", ""])
def test_save_pretrained_refuses_a_card_name_that_is_no_card_name_before_writing_anything(tmp_path, name):
    """model_copy does not validate: the name would have become the files' names, outside the folder for ../."""
    import vaezoo

    card, _ = entry(tmp_path / "cards")
    model = vaezoo.load(card)
    model.card = model.card.model_copy(update={"name": name})
    with pytest.raises(CardError, match=r"card .* would not load back, field 'name'"):
        vaezoo.save_pretrained(model, tmp_path / "out" / "saved")
    assert not (tmp_path / "out").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["cards"]


@pytest.mark.parametrize("repo_id, error, said", [
    (5, TypeError, "save_pretrained's repo_id is OWNER/REPO, a string, not int"),
    ("not a repo", OutputError, "the Hub takes no repository named not a repo (write OWNER/REPO)"),
    ("me/x--y", OutputError, "the Hub takes no repository named me/x--y (Cannot have -- or .. in repo_id)")])
def test_save_pretrained_refuses_a_repo_id_the_hub_would_before_writing_anything(tmp_path, repo_id, error, said):
    """It was written into the README's usage lines and recorded commands: vaezoo.load("hf-hub:not a repo")."""
    import vaezoo

    card, _ = entry(tmp_path / "cards")
    with pytest.raises(error) as caught:
        vaezoo.save_pretrained(vaezoo.load(card), tmp_path / "out" / "saved", repo_id=repo_id)
    assert str(caught.value).startswith(said), caught.value
    assert not (tmp_path / "out").exists()


def test_save_pretrained_waits_for_another_save_into_the_folder_and_then_refuses_its_card(tmp_path):
    """Two saves of different models into one new folder left two cards there, a folder nothing loads."""
    import threading

    import vaezoo
    from vaezoo.extras.hub_push import write_folder
    from vaezoo.store.locks import folder_lock

    card_a, _ = entry(tmp_path / "a", name="tiny-a")
    card_b, _ = entry(tmp_path / "b", seed=1, name="tiny-b")
    first, second, folder = vaezoo.load(card_a), vaezoo.load(card_b), tmp_path / "saved"
    outcome = []

    def save_second():
        try:
            vaezoo.save_pretrained(second, folder)
        except VaezooError as exc:
            outcome.append(exc)

    (tmp_path / "latest").symlink_to(folder.name)  # the first names the folder through a link
    with folder_lock(tmp_path / "latest"):  # stands for the first process's save, under way
        thread = threading.Thread(target=save_second)
        thread.start()
        thread.join(1.5)
        assert thread.is_alive()  # waiting
        write_folder(first.card, first.state_dict(), folder)
    thread.join(30)
    assert [str(e) for e in outcome] == [f"{folder} already holds tiny-a.toml; a model's folder holds no TOML "
                                         f"file but its card: give a new or empty folder"]
    assert vaezoo.load(folder).card.name == "tiny-a" and not (folder / "tiny-b.toml").exists()
    assert not any(p.name.endswith(".lock") for p in folder.iterdir())


HOLD_RUN = """
import sys, time
from pathlib import Path
from vaezoo.store.locks import run_lock
with run_lock(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(60)
"""


def test_save_pretrained_into_a_folder_vaezoo_train_is_training_in_is_refused_and_writes_nothing(tmp_path):
    """Its card was written beside the run's checkpoint; the run then published its own card: two cards, a folder
    nothing loads."""
    import vaezoo
    from vaezoo.store.locks import RUN_LOCK

    card, _ = entry(tmp_path / "cards")
    model, folder = vaezoo.load(card), tmp_path / "run"
    process = subprocess.Popen([sys.executable, "-c", HOLD_RUN, str(folder)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "held"  # stands for 'vaezoo train CARD --out run', training
        with pytest.raises(VaezooError, match=f"^folder {folder} is in use by process {process.pid} on .*; wait for "
                                              f"it to finish, or choose another folder$"):
            vaezoo.save_pretrained(model, folder)
        assert sorted(p.name for p in folder.iterdir()) == [RUN_LOCK, RUN_LOCK + ".holder"]
    finally:
        process.kill()
        process.wait()
    vaezoo.save_pretrained(model, folder)  # a run's folder no process trains in: saved, as before
    assert vaezoo.load(folder).card.name == "tiny"


def test_save_pretrained_into_a_folder_whose_parent_takes_no_lock_file_saves_unguarded(tmp_path, monkeypatch):
    """A container's mounted volume: the folder is writable, the read-only folder above it takes no lock file."""
    import errno

    import vaezoo

    card, weights = entry(tmp_path / "cards")
    (tmp_path / "volume").mkdir()
    refuse_writes(monkeypatch, tmp_path / ".volume.lock", errno.EROFS)
    vaezoo.save_pretrained(vaezoo.load(card), tmp_path / "volume")
    assert (tmp_path / "volume" / "tiny.safetensors").read_bytes() == weights.read_bytes()


@pytest.mark.parametrize("when", ["while the files are made", "between the renames"])
def test_a_save_interrupted_into_a_saved_folder_leaves_the_old_pair_or_the_new(tmp_path, monkeypatch, when):
    """Ctrl-C (or a kill) between the weights and the card left new weights beside the old card (5 saves of
    40): the folder loaded no more, and the old weights were gone."""
    import torch

    import vaezoo
    import vaezoo.entries.entry as entry_module
    import vaezoo.store.files as files

    card, _ = entry(tmp_path / "cards")
    model = vaezoo.load(card)
    vaezoo.save_pretrained(model, tmp_path / "saved")
    old_bias = model.head.bias.detach().clone()
    with torch.no_grad():
        model.head.bias.add_(1.0)
    real_replace, interrupts = files.os.replace, [KeyboardInterrupt()]

    def replace_then_interrupt(source, target):  # the signal lands just after the weights' rename
        real_replace(source, target)
        if interrupts:
            raise interrupts.pop()

    def interrupt(*_):
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:
        if when == "between the renames":
            patched.setattr(files.os, "replace", replace_then_interrupt)
        else:
            patched.setattr(entry_module, "sha256_of", interrupt)
        with pytest.raises(KeyboardInterrupt):
            vaezoo.save_pretrained(model, tmp_path / "saved")
    again = vaezoo.load(tmp_path / "saved")  # its weights match its card
    expected = model.head.bias if when == "between the renames" else old_bias
    assert torch.equal(again.head.bias, expected)
    assert not [p.name for p in (tmp_path / "saved").iterdir() if p.name.endswith(".tmp")]


def test_save_pretrained_waits_for_a_card_update_under_way_in_its_folder(tmp_path):
    """An eval --write that read the card before a save and wrote it after put the old card back beside the
    new weights (33 saves of 6,800): the save now waits for it, and the update then sees other weights."""
    import threading

    import torch

    import vaezoo
    from vaezoo.entries.entry import update_card
    from vaezoo.store.locks import card_lock

    card, _ = entry(tmp_path / "cards")
    model = vaezoo.load(card)
    vaezoo.save_pretrained(model, tmp_path / "saved")
    update_card(tmp_path / "saved" / "tiny.toml", lambda now: now)  # its lock file made, as eval --write makes it
    with torch.no_grad():
        model.head.bias.add_(1.0)
    with card_lock(tmp_path / "saved" / "tiny.toml"):  # an update under way
        thread = threading.Thread(target=vaezoo.save_pretrained, args=(model, tmp_path / "saved"))
        thread.start()
        thread.join(1.5)
        assert thread.is_alive()
    thread.join(30)
    assert torch.equal(vaezoo.load(tmp_path / "saved").head.bias, model.head.bias)


def test_a_metric_recorded_while_the_same_weights_are_saved_again_stays(tmp_path, monkeypatch):
    """The save read the card, an eval --write recorded a metric, the save wrote the card it had read: the
    metric was lost (6 of 12), though eval said it was written."""
    import threading

    import vaezoo
    import vaezoo.extras.pretrained as pretrained
    from vaezoo.entries.entry import update_card
    from vaezoo.entries.schema import Metric

    card, _ = entry(tmp_path / "cards")
    model = vaezoo.load(card)
    vaezoo.save_pretrained(model, tmp_path / "saved")
    path = tmp_path / "saved" / "tiny.toml"
    update_card(path, lambda now: now)  # its lock file made, as the first eval --write makes it
    recorded = {"metrics": {"mutual_info_score": Metric.model_validate(METRIC)}, "eval_metrics": ["mutual_info_score"]}
    read, real = threading.Event(), pretrained._with_recorded

    def read_then_wait(*args):
        result = real(*args)
        read.set()
        threading.Event().wait(1.0)  # the eval --write lands now
        return result

    monkeypatch.setattr(pretrained, "_with_recorded", read_then_wait)
    saving = threading.Thread(target=vaezoo.save_pretrained, args=(model, tmp_path / "saved"))
    saving.start()
    read.wait(30)
    update_card(path, lambda now: now.model_copy(update=recorded))  # waits for the save where it holds the lock
    saving.join(30)
    assert "mutual_info_score" in vaezoo.load(tmp_path / "saved").card.metrics


def test_save_pretrained_keeps_what_was_recorded_on_the_folders_card_of_the_same_weights(tmp_path):
    import torch

    import vaezoo
    from vaezoo.entries.entry import update_card
    from vaezoo.entries.schema import Metric

    card, _ = entry(tmp_path / "cards")
    vaezoo.save_pretrained(vaezoo.load(card), tmp_path / "saved")
    model = vaezoo.load(tmp_path / "saved")
    recorded = {"metrics": {"mutual_info_score": Metric.model_validate(METRIC)}, "eval_metrics": ["mutual_info_score"]}
    update_card(tmp_path / "saved" / "tiny.toml", lambda now: now.model_copy(update=recorded))  # eval --write
    vaezoo.save_pretrained(model, tmp_path / "saved")
    again = vaezoo.load(tmp_path / "saved").card
    assert set(again.metrics) == {"mutual_info_score"} and again.eval_metrics == ["mutual_info_score"]
    with torch.no_grad():
        model.head.bias.add_(1.0)  # other weights: what was measured on the old ones goes
    vaezoo.save_pretrained(model, tmp_path / "saved")
    assert vaezoo.load(tmp_path / "saved").card.metrics == {}


def test_save_pretrained_writes_its_own_readme_again_but_keeps_an_edited_one(tmp_path):
    """A README vaezoo wrote for the first save described metrics the fine-tuned weights never had."""
    import torch

    import vaezoo

    _, weights = entry(tmp_path / "cards")
    metric_card = write_card(tmp_path / "cards", make_card(name="tiny", metrics={"accuracy": METRIC},
                                                           headline="accuracy", weights=weights_entry(weights)))
    model = vaezoo.load(metric_card)
    readme = tmp_path / "saved" / "README.md"
    vaezoo.save_pretrained(model, tmp_path / "saved")
    assert "0.8873" in readme.read_text()
    with torch.no_grad():
        model.head.bias.add_(1.0)
    files = vaezoo.save_pretrained(model, tmp_path / "saved")
    assert readme in files and "0.8873" not in readme.read_text()
    readme.write_text(readme.read_text().replace("## Use", "## Use (my note)"))
    assert readme not in vaezoo.save_pretrained(model, tmp_path / "saved")
    assert "(my note)" in readme.read_text()


def test_save_pretrained_keeps_the_metrics_of_unchanged_weights_whose_file_is_gone(tmp_path):
    import torch

    import vaezoo

    _, weights = entry(tmp_path / "cards")
    metric_card = write_card(tmp_path / "cards", make_card(name="tiny", metrics={"accuracy": METRIC},
                                                           headline="accuracy", weights=weights_entry(weights)))
    model, tuned = vaezoo.load(metric_card), vaezoo.load(metric_card)
    weights.unlink()  # offline, or its cache emptied: the card's file cannot be had again
    vaezoo.save_pretrained(model, tmp_path / "saved")
    saved = vaezoo.load(tmp_path / "saved")
    assert saved.card.metrics == model.card.metrics and saved.card.headline == "accuracy"
    assert all(torch.equal(a, b) for a, b in zip(saved.state_dict().values(), model.state_dict().values()))

    with torch.no_grad():
        tuned.head.bias.add_(1.0)
    vaezoo.save_pretrained(tuned, tmp_path / "tuned")
    assert vaezoo.load(tmp_path / "tuned").card.metrics == {}
    vaezoo.save_pretrained(model.to(torch.float64), tmp_path / "float64")
    assert vaezoo.load(tmp_path / "float64").card.metrics == {}  # other values than those measured


def test_save_pretrained_keeps_a_readme_of_the_users_and_refuses_what_it_cannot_write(tmp_path):
    import torch

    import vaezoo

    card, _ = entry(tmp_path / "cards")
    model = vaezoo.load(card)
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "README.md").write_text("# my notes\n")
    files = vaezoo.save_pretrained(torch.compile(model), tmp_path / "mine")  # a compiled model saves as itself
    assert [f.name for f in files] == STAGED[:3]
    assert (tmp_path / "mine" / "README.md").read_text() == "# my notes\n"
    assert vaezoo.load(tmp_path / "mine").card.weights.sha256 == model.card.weights.sha256

    (tmp_path / "a-file").write_text("x")
    for folder, problem in (("", "needs a folder, not an empty path"), (tmp_path / "a-file", "is a file"),
                            (tmp_path / "a-file" / "below", "is a file, not a folder"),
                            (str(tmp_path / "nul\0"), "cannot save to")):
        with pytest.raises(OutputError, match=problem):
            vaezoo.save_pretrained(model, folder)
    assert (tmp_path / "a-file").read_text() == "x"


# push_to_hub, then from_pretrained with each of huggingface_hub's download options; prints one line per step.
HUB_CONVENTIONS = """
import sys, torch, vaezoo
from pathlib import Path
from vaezoo.errors import VaezooError
card, cache = sys.argv[1], Path(sys.argv[2])
model = vaezoo.load(card)
info = vaezoo.push_to_hub(model, "owner/conv", token="hf_write", commit_message="first")
print("pushed", info.oid)
def same(other):
    return all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), other.state_dict().values()))
loaded = vaezoo.from_pretrained("owner/conv", revision="main", cache_dir=cache, token="hf_read")
print("loaded", same(loaded), loaded.card.source, any(cache.rglob("*.safetensors")))
print("again", same(vaezoo.from_pretrained("owner/conv", revision=info.oid, cache_dir=cache, local_files_only=True)))
print("forced", same(vaezoo.from_pretrained("owner/conv", cache_dir=cache, force_download=True)))
try:
    vaezoo.from_pretrained("owner/conv", cache_dir=cache / "empty", local_files_only=True)
except VaezooError as exc:
    print("error", exc)
"""


@pytest.mark.slow
def test_from_pretrained_and_push_to_hub_follow_the_hub_conventions(hub, tmp_path):
    card, weights = entry(tmp_path / "cards")
    result = run_python("-c", HUB_CONVENTIONS, str(card), str(tmp_path / "cache"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    commit = hub.repos["owner/conv"].refs["main"]
    assert lines[0] == f"pushed {commit}"
    assert sorted(hub.files("owner/conv")) == [".gitattributes", *sorted(STAGED)]
    assert hub.files("owner/conv")["tiny.safetensors"] == weights.read_bytes()
    assert lines[1] == f"loaded True hf-hub:owner/conv@{commit} True"  # into cache_dir, not HF_HOME
    assert not (tmp_path / "hf_home" / "hub").exists()
    assert "Bearer hf_write" in hub.authorizations and "Bearer hf_read" in hub.authorizations
    assert lines[2] == "again True" and lines[3] == "forced True"
    assert hub.downloads("owner/conv", "tiny.safetensors") == 2  # once, then again when forced
    assert lines[4] == ("error cannot fetch the card of hf-hub:owner/conv: local_files_only is set and "
                        "huggingface_hub's cache lacks it; leave local_files_only unset to download it")


@pytest.mark.slow
def test_vaezoo_offline_keeps_to_huggingface_hubs_cache_and_verify_finds_hf_urls_there(hub, tmp_path):
    card, weights = entry(tmp_path / "repo")
    hub.commit(REPO_ID, as_repo(card, weights))
    url_card = write_card(tmp_path / "cards", make_card(
        name="tiny-url", weights=weights_entry(weights, url=f"hf://{REPO_ID}/{weights.name}")))
    offline = {**os.environ, "VAEZOO_OFFLINE": "1"}
    for name in (f"hf-hub:{REPO_ID}", str(url_card)):
        error = one_error_line(run_vaezoo("eval", name, "--metrics", "elbo", env=offline))
        assert "VAEZOO_OFFLINE=1 and huggingface_hub's cache lacks it; unset VAEZOO_OFFLINE to download it" in error
    assert hub.requests == []  # offline: the Hub was never asked

    assert load(str(url_card), str(weights))[0].startswith("True")  # online: into huggingface_hub's cache
    verified = run_vaezoo("verify", str(url_card), env=offline)
    assert verified.returncode == 0 and verified.stdout.startswith("tiny-url: ok ") and "hf_home" in verified.stdout
    [line] = load(f"hf-hub:{REPO_ID}", str(weights))  # the card and weights of the repository, cached now
    assert load(f"hf-hub:{REPO_ID}", str(weights), env=offline) == [line]


def test_verify_of_a_hub_model_downloads_its_weights_as_its_help_says(hub, tmp_path):
    """The help said 'without downloading any', where the weights of a Hub repository's card are downloaded (its
    file in that repository, as docs/hub.md says); weights at a URL are not."""
    card, weights = entry(tmp_path)
    hub.commit(REPO_ID, as_repo(card, weights))
    result = run_vaezoo("verify", f"hf-hub:{REPO_ID}")
    assert result.returncode == 0 and result.stdout.startswith("tiny: ok ")
    assert hub.downloads(REPO_ID, weights.name) == 1
    described = "".join(run_vaezoo("verify", "--help").stdout.split())  # as argparse wraps it, at spaces or hyphens
    assert "withoutdownloadingany" not in described
    assert "thoseofaHubrepository'scard(hf-hub:OWNER/REPO)are" in described


@pytest.mark.parametrize("named", ["..\\tiny.safetensors", "hf://owner/../tiny.safetensors"])
def test_a_hub_path_huggingface_hub_refuses_is_a_one_line_failure(hub, tmp_path, named):
    card, weights = entry(tmp_path)
    if named.startswith("hf://"):
        card = write_card(tmp_path / "cards", make_card(name="tiny-url", weights=weights_entry(weights, url=named)))
        error = one_error_line(run_vaezoo("eval", str(card), "--metrics", "elbo"))
        assert "cannot look up owner/..@main/tiny.safetensors in huggingface_hub's cache" in error
        return
    hub.commit(REPO_ID, {"tiny.toml": card.read_text().replace(f'file = "{weights.name}"', f"file = '{named}'")
                         .encode(), weights.name: weights.read_bytes()})
    result = run_vaezoo("verify", f"hf-hub:{REPO_ID}")
    assert result.returncode == 1 and "leaves its Hub repository" in result.stdout


@pytest.mark.parametrize("revision", ["..", "."])
def test_a_revision_that_is_no_branch_tag_or_commit_name_is_refused_before_the_hub_is_asked(hub, tmp_path, revision):
    card, weights = entry(tmp_path)
    hub.commit(REPO_ID, as_repo(card, weights))
    url_card = write_card(tmp_path / "cards", make_card(
        name="tiny-url", weights=weights_entry(weights, url=f"hf://{REPO_ID}@{revision}/{weights.name}")))
    def refusal(branch: str) -> str:
        return f"revision '{branch}' is no branch, tag or commit name (a part of it is empty or starts with '.')"

    refused = refusal(revision)

    # a URL reads '..' as the folder above: the Hub was asked for the repository itself, and main was loaded
    assert refused in one_error_line(run_vaezoo("info", f"hf-hub:{REPO_ID}@{revision}"))
    assert load(f"hf-hub:{REPO_ID}@{revision}", str(weights), str(url_card), str(weights)) == [
        f"CardError: hf-hub:{REPO_ID}@{revision}: {refused}; give a branch, a tag or a commit",
        f"WeightsError: weights URL 'hf://{REPO_ID}@{revision}/{weights.name}': {refused}; give a branch, a tag or "
        f"a commit"]
    result = run_python("-c", "import sys, vaezoo; vaezoo.from_pretrained(sys.argv[1], revision=sys.argv[2])",
                        REPO_ID, "")
    assert result.stderr.strip().splitlines()[-1].endswith(
        "CardError: revision '' is no branch, tag or commit name (a part of it is empty or starts with '.'); give a "
        "branch, a tag or a commit")
    for branch in (revision, ""):
        assert refusal(branch) in one_error_line(run_vaezoo("push", str(card), "owner/pushed", "--revision", branch))
    assert hub.requests == [] and "owner/pushed" not in hub.repos


@pytest.mark.parametrize("status, said", [(503, "answered HTTP 503 Service Unavailable (busy or failing); try again "
                                                 "later"),
                                          (429, "answered HTTP 429 Too Many Requests (busy or failing)"),
                                          (403, "refused it (HTTP 403): log in with a token allowed to do it")])
def test_a_hub_that_answers_with_an_error_is_said_to_have_answered_not_to_be_unreachable(hub, tmp_path, monkeypatch,
                                                                                         status, said):
    card, weights = entry(tmp_path)
    hub.commit(REPO_ID, as_repo(card, weights))
    answer = hub.answer
    failing = "/api/"

    def answered(method: str, path: str, body: bytes):
        return (status, {"Content-Type": "text/plain"}, b"not now") if failing in path else answer(method, path, body)

    monkeypatch.setattr(hub, "answer", answered)
    error = one_error_line(run_vaezoo("info", f"hf-hub:{REPO_ID}"))
    assert f"the Hub at {hub.endpoint} {said}" in error and "cannot be reached" not in error

    failing = f"/{weights.name}"  # the card in the cache now; its weights answered with the error
    assert run_vaezoo("info", f"hf-hub:{REPO_ID}").returncode == 0
    result = run_vaezoo("verify", f"hf-hub:{REPO_ID}")
    assert result.returncode == 1 and f"the Hub at {hub.endpoint} {said}" in result.stdout


def test_a_hub_cache_that_cannot_be_written_is_one_line_naming_the_setting_to_change(hub, tmp_path, monkeypatch):
    card, weights = entry(tmp_path)
    hub.commit(REPO_ID, as_repo(card, weights))
    file = tmp_path / "not-a-folder"
    file.write_text("mine\n")
    monkeypatch.setenv("HF_HOME", str(file))
    error = one_error_line(run_vaezoo("info", f"hf-hub:{REPO_ID}"))
    assert error.endswith(f"huggingface_hub's cache {file}/hub cannot be written ({file}/token: Not a directory); "
                          f"set HF_HOME (or HF_HUB_CACHE) to a folder you can write to")

    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
    result = run_python("-c", "import sys, vaezoo; vaezoo.from_pretrained(sys.argv[1], cache_dir=sys.argv[2])",
                        REPO_ID, str(file / "cache"))
    assert result.stderr.strip().splitlines()[-1].endswith(
        f"huggingface_hub's cache {file}/cache cannot be written ({file}/cache: Not a directory); set cache_dir to a "
        f"folder you can write to")
    assert "tree cache" not in result.stderr  # huggingface_hub's warnings about its listing: the error says it
    assert file.read_text() == "mine\n"


SAVE_INTO_THE_CACHE = """
import sys, torch, vaezoo
from vaezoo.errors import OutputError
default, own = vaezoo.load(sys.argv[1]), vaezoo.from_pretrained(sys.argv[1], cache_dir=sys.argv[2])
for model, folder in ((default, default.card.path.parent), (default, default.card.path.parent.parent / "beside"),
                      (own, own.card.path.parent)):
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(1.0)  # fine-tuned
    try:
        vaezoo.save_pretrained(model, folder)
    except OutputError as exc:
        print(exc)
"""


def test_save_pretrained_into_huggingface_hubs_cache_is_refused_and_the_commit_loads_as_it_was(hub, tmp_path):
    card, weights = entry(tmp_path / "repo")
    commit = hub.commit(REPO_ID, as_repo(card, weights))
    result = run_python("-c", SAVE_INTO_THE_CACHE, f"hf-hub:{REPO_ID}", str(tmp_path / "cache_dir"))
    assert result.returncode == 0, result.stderr
    said = "is in huggingface_hub's cache, whose files are a Hub repository's at a commit; save into another folder"
    snapshots = [tmp_path / "hf_home" / "hub" / "models--owner--tiny" / "snapshots",
                 tmp_path / "cache_dir" / "models--owner--tiny" / "snapshots"]
    # the default cache refuses any folder in it; a cache_dir of the caller's, the model's own snapshot
    assert result.stdout.splitlines() == [f"{snapshots[0] / commit} {said}", f"{snapshots[0] / 'beside'} {said}",
                                          f"{snapshots[1] / commit} {said}"]
    for snapshot in snapshots:
        assert [p.name for p in snapshot.iterdir()] == [commit]
        assert sorted(p.name for p in (snapshot / commit).iterdir()) == ["tiny.safetensors", "tiny.toml"]
        assert all((snapshot / commit / name).is_symlink() for name in ("tiny.safetensors", "tiny.toml"))
    # the commit's name loads the commit's weights, not the fine-tuned ones saved over its snapshot
    assert load(f"hf-hub:{REPO_ID}@{commit}", str(weights)) == [f"True hf-hub:{REPO_ID}@{commit}"]


@pytest.mark.parametrize("cuts", [1, 100])
def test_a_hub_download_cut_short_is_retried_without_a_line_for_each_retry(hub, tmp_path, monkeypatch, cuts):
    card, weights = entry(tmp_path)
    hub.commit(REPO_ID, as_repo(card, weights))
    answer, cut = hub.answer, []

    def cut_short(method: str, path: str, body: bytes):
        status, headers, payload = answer(method, path, body)
        if method == "GET" and path.endswith(f"/{weights.name}") and len(cut) < cuts:
            cut.append(path)
            return status, headers, payload[:100]  # the Content-Length of the whole file: the rest never comes
        return status, headers, payload

    monkeypatch.setattr(hub, "answer", cut_short)
    monkeypatch.setenv("HF_HUB_DOWNLOAD_TIMEOUT", "1")
    result = run_vaezoo("verify", f"hf-hub:{REPO_ID}")
    assert hub.downloads(REPO_ID, weights.name) > 1  # huggingface_hub retried
    if cuts == 1:
        assert result.returncode == 0 and result.stdout.startswith("tiny: ok ") and result.stderr == ""
    else:
        assert result.returncode == 1 and result.stdout.startswith("tiny: FAILED cannot download ")
        assert len(result.stdout.splitlines()) == 1
        assert result.stderr == "error: 1 weights file(s) failed verification\n"


@pytest.mark.parametrize("variable, value", [("HF_HUB_ETAG_TIMEOUT", "0.5"), ("HF_HUB_DOWNLOAD_TIMEOUT", "soon")])
def test_a_huggingface_hub_setting_it_cannot_start_with_is_named(hub, monkeypatch, variable, value):
    monkeypatch.setenv(variable, value)
    assert one_error_line(run_vaezoo("info", f"hf-hub:{REPO_ID}")) == (
        f"error: huggingface_hub cannot start with {variable}='{value}' (invalid literal for int() with base 10: "
        f"'{value}'); correct or unset it")  # it said to check HF_ENDPOINT and HF_HOME
    assert hub.requests == []


FORCED = """
import sys, vaezoo
try:
    vaezoo.from_pretrained(sys.argv[1], force_download=True, local_files_only=sys.argv[2] == "local")
except vaezoo.errors.VaezooError as exc:
    print(exc)
"""


def test_force_download_where_the_cache_is_kept_to_says_so_not_that_the_cache_lacks_it(hub, tmp_path):
    card, weights = entry(tmp_path)
    hub.commit(REPO_ID, as_repo(card, weights))
    assert load(f"hf-hub:{REPO_ID}", str(weights))[0].startswith("True")  # in huggingface_hub's cache now
    hub.requests.clear()
    for keeping, kept in (("local", "local_files_only is set"), ("HF_HUB_OFFLINE", "HF_HUB_OFFLINE is set"),
                          ("VAEZOO_OFFLINE", "VAEZOO_OFFLINE=1")):
        result = run_python("-c", FORCED, REPO_ID, keeping, env={**os.environ, keeping: "1"})
        assert result.stdout.splitlines() == [
            f"cannot download {REPO_ID}@{hub.repos[REPO_ID].refs['main']}/{weights.name}: force_download asks for a "
            f"fresh copy, and {kept}, which keeps to huggingface_hub's cache; give one of them"], result.stderr
    assert hub.requests == []


@pytest.mark.parametrize("option, instead", [("cache_dir", "None for huggingface_hub's cache (HF_HUB_CACHE)"),
                                             ("token", "None for the one logged in, or False for none")])
def test_from_pretrained_refuses_an_empty_cache_dir_or_token(monkeypatch, tmp_path, option, instead):
    import vaezoo

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("vaezoo.hub.load", lambda *args, **kwargs: pytest.fail("loaded"))
    said = re.escape(f"from_pretrained's {option} is empty; give one, or {instead}")
    for empty in ("", " "):  # the cache was made in the current folder; the token sent as 'Bearer '
        with pytest.raises(OutputError, match=said):
            vaezoo.from_pretrained("owner/repo", **{option: empty})
    assert list(tmp_path.iterdir()) == []


def test_from_pretrained_refuses_hub_options_for_a_model_not_on_the_hub_as_it_refuses_revision(tmp_path):
    """``from_pretrained("jointvae-mnist", cache_dir=..., force_download=True, token=...)`` loaded the zoo entry
    as if they had been applied; ``local_files_only=True`` and ``token=False`` ask nothing of the Hub, and load."""
    import vaezoo

    card, _ = entry(tmp_path / "mine")
    for name in ("jointvae-mnist", str(card.parent), str(card)):
        for options, said in (({"cache_dir": tmp_path / "cache"}, "cache_dir is"),
                              ({"force_download": True}, "force_download is"), ({"token": "hf_secret"}, "token is"),
                              ({"token": True}, "token is"),
                              ({"cache_dir": tmp_path / "cache", "force_download": True, "token": "hf_secret"},
                               "cache_dir, force_download and token are")):
            with pytest.raises(OutputError) as refused:
                vaezoo.from_pretrained(name, **options)
            them = "them" if said.endswith("are") else "it"
            assert str(refused.value) == (f"{said} for a model on the Hub, and '{name}' is neither a Hub repository "
                                          f"nor a card whose weights are there; leave {them} out")
        assert vaezoo.from_pretrained(name, local_files_only=True, token=False).card.weights.sha256
    assert not (tmp_path / "cache").exists()


def test_from_pretrained_applies_hub_options_to_a_card_whose_weights_are_on_the_hub(hub, tmp_path):
    """A card of its own whose weights are at an hf:// URL fetches them through huggingface_hub: its cache_dir was
    left for HF_HOME's cache."""
    card, weights = entry(tmp_path / "repo")
    hub.commit(REPO_ID, as_repo(card, weights))
    url_card = write_card(tmp_path / "cards", make_card(
        name="tiny-url", weights=weights_entry(weights, url=f"hf://{REPO_ID}/{weights.name}")))
    cache = tmp_path / "own-cache"
    result = run_python("-c", "import sys, vaezoo; vaezoo.from_pretrained(sys.argv[1], cache_dir=sys.argv[2])",
                        str(url_card), str(cache))
    assert result.returncode == 0, result.stderr
    assert [path.name for path in cache.rglob(weights.name)] == [weights.name]
    assert not list((tmp_path / "hf_home").rglob(weights.name))


def test_push_to_hub_leaves_nothing_in_the_temporary_folder(hub, tmp_path, monkeypatch):
    card, _ = entry(tmp_path / "cards")
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    monkeypatch.setenv("TMPDIR", str(temporary))
    monkeypatch.setenv("HF_TOKEN", "hf_write")
    result = run_python("-c", "import sys, vaezoo; vaezoo.push_to_hub(vaezoo.load(sys.argv[1]), 'owner/pushed')",
                        str(card))
    assert result.returncode == 0, result.stderr
    assert "tiny.toml" in hub.files("owner/pushed")
    assert list(temporary.iterdir()) == []  # the lock file of the folder it staged stayed, one a push


def test_a_push_during_which_another_lands_on_the_branch_is_refused_not_left_with_two_cards(hub, tmp_path,
                                                                                             monkeypatch):
    card, weights = entry(tmp_path / "mine")
    other, other_weights = entry(tmp_path / "theirs", seed=1, name="other")
    hub.commit(REPO_ID, {".gitattributes": b"", "README.md": b"# tiny\n"})
    answer = hub.answer

    def meanwhile(method: str, path: str, body: bytes):  # another push lands once this one has read the branch's head
        if "/preupload/" in path and "other.toml" not in hub.files(REPO_ID):
            hub.commit(REPO_ID, as_repo(other, other_weights))
        return answer(method, path, body)

    monkeypatch.setattr(hub, "answer", meanwhile)
    monkeypatch.setenv("HF_TOKEN", "hf_write")
    error = one_error_line(run_vaezoo("push", str(card), REPO_ID))
    assert error == (f"error: cannot push 'tiny' to {REPO_ID}: another commit landed on the branch during the push "
                     f"(another push?); push again")
    assert [p for p in hub.files(REPO_ID) if p.endswith(".toml")] == ["other.toml"]  # the other's card alone
    result = run_vaezoo("push", str(card), REPO_ID)  # again: it replaces the other's card
    assert result.returncode == 0, result.stderr
    assert [p for p in hub.files(REPO_ID) if p.endswith(".toml")] == ["tiny.toml"]


def test_an_endpoint_that_answers_a_web_page_where_the_hubs_api_belongs_is_said_to(hub, tmp_path, monkeypatch):
    card, weights = entry(tmp_path)
    hub.commit(REPO_ID, as_repo(card, weights))
    monkeypatch.setattr(hub, "answer", lambda method, path, body: (200, {"Content-Type": "text/html"},
                                                                   b"<html>Sign in to continue</html>"))
    assert one_error_line(run_vaezoo("info", f"hf-hub:{REPO_ID}")) == (
        f"error: cannot fetch the card of hf-hub:{REPO_ID}: the Hub at {hub.endpoint} answered with something other "
        f"than the Hub's API (not JSON); check HF_ENDPOINT, and any proxy or login page between this machine and the "
        f"Hub")  # it was json's 'Expecting value: line 1 column 1 (char 0)'


@pytest.mark.parametrize("endpoint", ["", "127.0.0.1:9", "ftp://127.0.0.1:9", "HUB ", "HUB\t"])
def test_an_hf_endpoint_that_is_no_http_address_is_named(hub, monkeypatch, endpoint):
    endpoint = endpoint.replace("HUB", hub.endpoint)  # pasted with a space: "Port could not be cast to integer"
    monkeypatch.setenv("HF_ENDPOINT", endpoint)  # the transport's words: "Request URL is missing ... protocol"
    problem = "holds a space or a control character" if endpoint.startswith("http") else "is no http or https address"
    result = run_vaezoo("info", f"hf-hub:{REPO_ID}")  # huggingface_hub printed "Error importing ..." on stdout
    assert (one_error_line(result), result.stdout) == (
        f"error: cannot fetch the card of hf-hub:{REPO_ID}: HF_ENDPOINT {endpoint!r} {problem}; set it to the Hub's "
        f"(https://huggingface.co) or a mirror's, or unset it", "")


def test_a_silent_hub_is_waited_for_as_long_as_huggingface_hub_waits_for_a_files_metadata(hub, tmp_path,
                                                                                         monkeypatch):
    card, weights = entry(tmp_path)
    hub.commit(REPO_ID, as_repo(card, weights))
    monkeypatch.setenv("HF_HUB_ETAG_TIMEOUT", "1")
    answer, silent, released = hub.answer, ["/api/"], threading.Event()

    def unanswered(method: str, path: str, body: bytes):
        if any(part in path for part in silent):
            released.wait(120)  # huggingface_hub asks its API with no deadline: it waited this long
        return answer(method, path, body)

    monkeypatch.setattr(hub, "answer", unanswered)
    try:
        error = one_error_line(run_vaezoo("info", f"hf-hub:{REPO_ID}", timeout=60))
        assert error == (f"error: cannot fetch the card of hf-hub:{REPO_ID}: the Hub at {hub.endpoint} did not answer "
                         f"within 1 s and huggingface_hub's cache lacks it; try again later, or give it longer "
                         f"(HF_HUB_ETAG_TIMEOUT)")
        silent.clear()
        commit = run_vaezoo("info", f"hf-hub:{REPO_ID}").stdout.splitlines()[1]
        silent.append("/api/")  # the card in the cache: served at the commit main had
        cached = run_vaezoo("info", f"hf-hub:{REPO_ID}", timeout=60)
        assert cached.returncode == 0 and cached.stdout.splitlines()[1] == commit, cached.stderr
        silent.append(f"/{weights.name}")
        result = run_vaezoo("verify", f"hf-hub:{REPO_ID}", timeout=60)
        assert result.returncode == 1 and (f"the Hub at {hub.endpoint} did not answer in time (1 s for a file's "
                                           f"metadata, HF_HUB_ETAG_TIMEOUT;") in result.stdout
    finally:
        released.set()


@pytest.mark.parametrize("answer", [b"[]", b"{}", b"null"])
def test_a_hub_answering_json_of_another_shape_is_one_line(hub, tmp_path, monkeypatch, answer):
    card, weights = entry(tmp_path)
    hub.commit(REPO_ID, as_repo(card, weights))
    monkeypatch.setattr(hub, "answer", lambda method, path, body: (200, {"Content-Type": "application/json"}, answer))
    error = one_error_line(run_vaezoo("info", f"hf-hub:{REPO_ID}"))
    assert error.startswith(f"error: cannot fetch the card of hf-hub:{REPO_ID}: the Hub at {hub.endpoint} answered "
                            f"with something other than the Hub's API (JSON of another shape: ")


def test_a_repository_name_huggingface_hub_refuses_and_a_token_no_header_carries_are_named(hub, tmp_path,
                                                                                           monkeypatch):
    card, weights = entry(tmp_path)
    hub.commit(REPO_ID, as_repo(card, weights))
    url_card = write_card(tmp_path / "cards", make_card(
        name="tiny-url", weights=weights_entry(weights, url=f"hf://owner--x/tiny/{weights.name}")))
    assert one_error_line(run_vaezoo("info", "hf-hub:owner/tiny.git")) == (
        "error: cannot fetch the card of hf-hub:owner/tiny.git: the Hub takes no repository named so (Repo_id cannot "
        "end by '.git': 'owner/tiny.git'); check the name")
    assert one_error_line(run_vaezoo("eval", str(url_card), "--metrics", "elbo")).endswith(
        "the Hub takes no repository named so (Cannot have -- or .. in repo_id: 'owner--x/tiny'); check the name")

    pasted = one_error_line(run_vaezoo("info", f"hf-hub:{REPO_ID}", env={**os.environ, "HF_TOKEN": "hf_\u00e4bc"}))
    assert pasted.endswith("the Hub token holds 'ä', which is not ASCII and which no HTTP header carries; give the "
                           "token as the Hub wrote it (HF_TOKEN, token=, or 'hf auth login')")
    folder = tmp_path / "token"
    folder.mkdir()
    unread = one_error_line(run_vaezoo("info", f"hf-hub:{REPO_ID}", env={**os.environ, "HF_TOKEN_PATH": str(folder)}))
    assert unread.endswith(f"huggingface_hub's token file HF_TOKEN_PATH={folder} cannot be read (Is a directory); set "
                           f"HF_TOKEN_PATH to the file 'hf auth login' writes, or unset it")
    assert hub.requests == []


def test_vaezoo_progress_off_turns_huggingface_hubs_progress_bars_off_too(hub, tmp_path, monkeypatch):
    card, weights = entry(tmp_path)
    hub.commit(REPO_ID, as_repo(card, weights))
    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS")
    result = run_vaezoo("verify", f"hf-hub:{REPO_ID}", env={**os.environ, "VAEZOO_PROGRESS": "0"})
    assert result.returncode == 0 and result.stdout.startswith("tiny: ok ") and result.stderr == ""
    shown = run_vaezoo("verify", f"hf-hub:{REPO_ID}", env={**os.environ, "HF_HUB_CACHE": str(tmp_path / "other")})
    assert shown.returncode == 0 and "Fetching 1 files" in shown.stderr  # huggingface_hub's own, left as it has them


def test_a_request_the_hub_calls_bad_says_the_hubs_reason(hub, tmp_path, monkeypatch):
    card, _ = entry(tmp_path / "cards")
    answer = hub.answer

    def refused(method: str, path: str, body: bytes):
        if "/branch/" in path:
            return 400, {"Content-Type": "application/json"}, b'{"error": "Invalid reference name: main~1"}'
        return answer(method, path, body)

    monkeypatch.setattr(hub, "answer", refused)
    error = one_error_line(run_vaezoo("push", str(card), "owner/x", "--revision", "main~1"))
    assert error == (f"error: cannot push 'tiny' to owner/x: Bad request: Invalid reference name: main~1 (Hub "
                     f"{hub.endpoint})")  # it was 'Bad request:' alone


@pytest.mark.parametrize("revision", [" main", "main\n", "v1\t"])
def test_a_revision_pasted_with_a_space_or_control_character_is_named_before_the_hub_is_asked(hub, tmp_path,
                                                                                             revision):
    card, _ = entry(tmp_path / "cards")
    refused = (f"revision {revision!r} is no branch, tag or commit name (it holds a space or a control character); "
               f"give a branch, a tag or a commit")
    result = run_python("-c", "import sys, vaezoo; vaezoo.from_pretrained(sys.argv[1], revision=sys.argv[2])",
                        REPO_ID, revision)
    assert result.stderr.strip().splitlines()[-1] == f"vaezoo.errors.CardError: {refused}"  # not 'hf-hub:...@ main'
    assert one_error_line(run_vaezoo("push", str(card), "owner/x", "--revision", revision)) == f"error: {refused}"
    assert hub.requests == []


@pytest.mark.parametrize("load, name", [
    ("from_pretrained", "owner/tiny\n"), ("load", "hf-hub:owner/tiny\n"), ("load", "hf-hub:own\x1ber/tiny"),
    ("get_card", "owner/tiny@v\u20281"), ("load", "https://example.org/a\nb")])
def test_a_name_holding_a_control_character_is_escaped_in_the_python_message(load, name):
    """The Python message held the raw newline (two lines) or ESC, where the CLI escaped it."""
    import vaezoo

    with pytest.raises(CardError) as caught:
        getattr(vaezoo, load)(name)
    message = str(caught.value)
    assert message.isprintable() and repr(name)[1:-1] in message
    error = VaezooError.about("{name:{given}} is no model", given=name)  # as the CLI spells its options
    assert str(error).isprintable() and error.spelled(lambda key, value: f"--{key} {value}").isprintable()


@pytest.mark.parametrize("silent", [r"/api/repos/create$", rf"/api/models/{REPO_ID}$", "/preupload/", "/commit/"],
                         ids=["create", "head", "preupload", "commit"])
def test_a_push_to_a_hub_that_never_answers_stops_after_vaezoo_timeout(hub, tmp_path, monkeypatch, silent):
    """huggingface_hub's commit requests take no timeout: a Hub that took the connection and never answered held the
    push until Ctrl-C. (huggingface_hub tries the upload modes' request again five times, saying so on stderr.)"""
    card, _ = entry(tmp_path / "cards")
    hub.commit(REPO_ID, {".gitattributes": b"", "README.md": b"# tiny\n"})
    answer, released = hub.answer, threading.Event()

    def unanswered(method: str, path: str, body: bytes):
        if re.search(silent, urlsplit(path).path):
            released.wait(120)
        return answer(method, path, body)

    monkeypatch.setattr(hub, "answer", unanswered)
    monkeypatch.setenv("VAEZOO_TIMEOUT", "1")
    try:
        result = run_vaezoo("push", str(card), REPO_ID, timeout=90)
    finally:
        released.set()
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"error: cannot push 'tiny' to {REPO_ID}: the Hub at {hub.endpoint} did not answer a request within 1 s; the "
        f"push may or may not have landed: check the repository, then push again, or give it longer (VAEZOO_TIMEOUT)")
    assert "tiny.toml" not in hub.files(REPO_ID)
