"""The README, CONTRIBUTING and docs as a reader uses them: the zoo table is the cards', the examples run, links and
anchors resolve.

A code block is run unless an HTML comment ``<!-- no-run: reason -->`` stands right before it. A block
that reads ``../shared/...`` is skipped, with a message, where that path is absent; one that reads a card's
dataset (``card_dataset(``) runs with ``VAEZOO_DATA`` at ``../shared/datasets``, as a user's shell with
their data folder set, and is skipped likewise where it is absent.

The zoo pages are model cards of one template (docs/zoo/TEMPLATE.md); the docs hold no history (no
``git show``, no ``../shared``): that is the notebook's, notes/.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import get_args

import pytest

from kit import make_card, require_shared, write_card
from vaezoo.cli import main

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
PAGES = [README, REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md")),
         *sorted((REPO / "docs" / "zoo").glob("*.md"))]
ZOO_PAGES = [p for p in sorted((REPO / "docs" / "zoo").glob("*.md")) if p.name != "TEMPLATE.md"]
# The headings of every zoo page, in this order, and no others at their level (docs/zoo/TEMPLATE.md).
TEMPLATE = ["Load", "Use", "Recipe", "Results across seeds", "Caveats", "How to reproduce"]
SHARED_DATA = REPO.parent / "shared" / "datasets"

FENCE = re.compile(r"^```(?P<lang>\w*)\n(?P<code>.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
NO_RUN = re.compile(r"<!-- no-run: (?P<reason>[^>]*\S) -->\s*\Z")
ZOO_TABLE = re.compile(r"<!-- zoo-table\b[^>]*-->\n(?P<table>.*?)<!-- /zoo-table -->", re.DOTALL)
SHARED_PATH = re.compile(r"\.\./shared/[\w./-]*")
LINK = re.compile(r"\]\((?P<target>[^)#\s]+)(?:#[^)]*)?\)")
ANCHORED_LINK = re.compile(r"\]\((?P<target>[^)#\s]*)#(?P<anchor>[^)\s]+)\)")
# README commands that are fast and change nothing: they run as written.
SAFE_COMMAND = re.compile(r"^vaezoo (list|info|plugins|verify)\b")


@dataclass(frozen=True)
class Block:
    """A fenced code block of a page."""

    page: Path
    line: int
    lang: str
    code: str
    no_run: str | None  # the reason given in a no-run comment right before the block

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def code_blocks(page: Path) -> list[Block]:
    """The fenced code blocks of ``page``, in order."""
    text = page.read_text(encoding="utf-8")
    blocks = []
    for match in FENCE.finditer(text):
        marker = NO_RUN.search(text, 0, match.start())
        blocks.append(Block(page, text.count("\n", 0, match.start()) + 1, match["lang"], match["code"],
                            marker["reason"] if marker else None))
    return blocks


def user_env(**extra: str) -> dict[str, str]:
    """This environment as a user's shell has it: every installed plugin, no extra card folders."""
    env = {k: v for k, v in os.environ.items() if k not in ("VAEZOO_CARDS_PATH", "VAEZOO_LOAD_PLUGINS")}
    bin_dir = str(Path(sys.executable).parent)  # where the test environment's `vaezoo` command lives
    return {**env, "PATH": bin_dir + os.pathsep + env.get("PATH", ""), "OMP_NUM_THREADS": "1", **extra}


def skip_without_shared(code: str) -> None:
    """Skip (or fail, see :func:`kit.require_shared`) when ``code`` reads a ``../shared`` path this checkout lacks."""
    require_shared(*(REPO / p for p in sorted(set(SHARED_PATH.findall(code)))))


PYTHON_BLOCKS = [b for page in PAGES for b in code_blocks(page) if b.lang == "python"]
README_BLOCKS = code_blocks(README)
# The first block holds the set-up commands (.ci/run runs them); the others are what a user types.
SAFE_COMMANDS = [line.strip() for b in README_BLOCKS[1:] if b.lang == "bash"
                 for line in b.code.splitlines() if SAFE_COMMAND.match(line.strip())]


def test_readme_zoo_table_is_the_output_of_vaezoo_list_markdown():
    tables = ZOO_TABLE.findall(README.read_text(encoding="utf-8"))
    assert len(tables) == 1, "README.md needs one table between <!-- zoo-table --> and <!-- /zoo-table -->"
    builtin = sorted(ep.name for ep in entry_points(group="vaezoo") if ep.dist and ep.dist.name == "vaezoo")
    result = subprocess.run([sys.executable, "-m", "vaezoo", "list", "--markdown"], check=False, cwd=REPO,
                            capture_output=True, text=True, timeout=120,
                            env=user_env(VAEZOO_LOAD_PLUGINS=",".join(builtin)))
    assert result.returncode == 0, result.stderr
    assert tables[0] == result.stdout, "the README's zoo table is stale: paste the output of 'vaezoo list --markdown'"


def test_markdown_table_shows_card_text_as_written(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", "")
    monkeypatch.setenv("VAEZOO_CARDS_PATH", str(tmp_path))
    metric = {"value": 0.25, "command": "vaezoo eval toy-b", "vaezoo_version": "0.1.0"}
    summary = "a | b <img src=x> *bold* `code` [link](y) ~~gone~~ \x1b[31mred\nnext"
    write_card(tmp_path, make_card(name="toy-b", summary=summary,
                                   latent="gaussian(3)", parameters=1234, metrics={"my_metric": metric},
                                   headline="my_metric"))
    write_card(tmp_path, make_card(name="toy-a", dataset="dsprites"))
    assert main(["list", "--markdown"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == ["| name | what it is | latent | parameters | headline metric |",
                         "| --- | --- | --- | --- | --- |"]
    assert lines[2] == "| `toy-a` | test card toy-a |  |  |  |"
    # Control characters are shown as their escapes (\x1b, \n), with the backslash escaped for Markdown.
    assert lines[3] == ("| `toy-b` | a \\| b \\<img src=x\\> \\*bold\\* \\`code\\` \\[link\\](y) \\~\\~gone\\~\\~ "
                        "\\\\x1b\\[31mred\\\\nnext | gaussian(3) | 1,234 | my\\_metric 0.25 |")
    assert len(lines) == 4
    assert main(["list", "--markdown", "--dataset", "dsprites"]) == 0
    assert capsys.readouterr().out.splitlines()[2:] == ["| `toy-a` | test card toy-a |  |  |  |"]


def test_markdown_and_json_exclude_each_other(capsys):
    assert main(["list", "--markdown", "--json"]) == 2
    assert "not allowed with argument" in capsys.readouterr().err


def _example(block) -> pytest.param:
    """A block to run; one that scores the whole of dSprites (``dsprites()``, 737,280 images) is slow."""
    return pytest.param(block, id=block.id, marks=[pytest.mark.slow] if "dsprites()" in block.code else [])


@pytest.mark.parametrize("block", [_example(b) for b in PYTHON_BLOCKS])
def test_python_example_runs(block):
    compile(block.code, block.id, "exec")
    if block.no_run:
        pytest.skip(f"marked no-run: {block.no_run}")
    skip_without_shared(block.code)
    data = {}
    if "card_dataset(" in block.code:  # the user's data folder, as $VAEZOO_DATA
        require_shared(SHARED_DATA)
        data = {"VAEZOO_DATA": str(SHARED_DATA)}
    result = subprocess.run([sys.executable, "-c", block.code], check=False, cwd=REPO, env=user_env(**data),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, f"{block.id} failed:\n{result.stderr[-3000:]}"


@pytest.mark.parametrize("command", SAFE_COMMANDS, ids=lambda c: c.partition("#")[0].strip())
def test_readme_command_runs(command):
    result = subprocess.run(["bash", "-c", command], check=False, cwd=REPO, env=user_env(), capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, f"{command!r} failed:\n{result.stderr[-3000:]}"
    assert result.stdout.strip() and "Traceback" not in result.stderr


def test_readme_shows_the_user_commands_and_loads_a_trained_folder():
    assert {SAFE_COMMAND.match(c)[1] for c in SAFE_COMMANDS} == {"list", "info", "plugins", "verify"}
    python = "\n".join(b.code for b in README_BLOCKS if b.lang == "python")
    assert 'device="cpu"' in python and 'vaezoo.load("runs/x")' in python
    assert any(line.startswith("vaezoo train ") and "--out runs/x" in line and "--name " in line
               for b in README_BLOCKS for line in b.code.splitlines())


# A command line of a shell block: what follows a shell's `&&`, `;` or `|`, after any VAR=value, up to a comment.
SHELL_COMMAND = re.compile(r"(?:^|&&|;|\|)\s*(?:[A-Z_]+=\S*\s+)*(?P<command>vaezoo [^#&;|]*)")
# A word in capitals alone (N, DATA, DIR) stands for a value the reader gives.
PLACEHOLDER = re.compile(r"[A-Z]+")
DOC_COMMANDS = [pytest.param(m["command"].strip(), id=f"{b.id}:{m['command'].split()[1]}")
                for page in PAGES for b in code_blocks(page) if b.lang == "bash"
                for line in b.code.splitlines() for m in SHELL_COMMAND.finditer(line)]
# An inline command of the prose, such as `vaezoo eval RUN --write`: its options are checked, not its arguments.
INLINE_COMMAND = re.compile(r"`(?:python -m )?vaezoo (?P<command>[a-z][a-z-]*)(?P<rest>[^`]*)`")
OPTION = re.compile(r"(?<![\w-])--?[a-zA-Z][\w-]*")


def _subcommands() -> dict:
    """``name -> argparse parser`` of every command, the extras' included."""
    from vaezoo.cli import build_parser

    return next(a for a in build_parser()._actions if a.dest == "command").choices


@pytest.mark.parametrize("command", DOC_COMMANDS)
def test_every_command_a_shell_block_shows_is_one_vaezoo_understands(command, monkeypatch, capsys):
    """Each command of a README, docs/ or CONTRIBUTING shell block, run or not, parses as written: its command, its
    options and their values, on any machine (one without the GPU a `--device cuda` names too)."""
    from vaezoo import devices
    from vaezoo.cli import build_parser

    monkeypatch.setattr(devices, "_count", lambda kind: 1)
    argv = ["1" if PLACEHOLDER.fullmatch(word) else word for word in shlex.split(command)[1:]]
    try:
        build_parser().parse_args(argv)
    except SystemExit:
        pytest.fail(f"{command!r} is not understood: {capsys.readouterr().err.strip().splitlines()[-1]}")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_option_the_prose_names_in_a_command_is_one_that_command_has(page):
    commands = _subcommands()
    unknown = []
    for match in INLINE_COMMAND.finditer(FENCE.sub("", page.read_text(encoding="utf-8"))):
        parser = commands.get(match["command"])
        if parser is None:  # `vaezoo --help`, `vaezoo train/eval/show`: no one command
            continue
        options = {option for action in parser._actions for option in action.option_strings}
        own = re.split(r"\\?\||\s--\s", match["rest"])[0]  # up to a pipe into another program, or `--`
        unknown += [f"{match[0]}: {option}" for option in OPTION.findall(own) if option not in options]
    assert not unknown, f"{page.relative_to(REPO)} names options its commands lack: {unknown}"


def test_no_run_marks_only_a_code_block():
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        marked = sum(b.no_run is not None for b in code_blocks(page))
        written = len(re.findall(r"^<!-- no-run:", text, re.MULTILINE))  # not one quoted in the prose
        assert written == marked, f"{page.relative_to(REPO)}: a no-run comment not before a block"


def test_readme_links_every_zoo_page():
    linked = {(README.parent / m["target"]).resolve() for m in LINK.finditer(README.read_text(encoding="utf-8"))}
    unlinked = [p.name for p in sorted((REPO / "docs" / "zoo").glob("*.md")) if p.resolve() not in linked]
    assert not unlinked, f"README.md links no zoo page {unlinked}: add it to the list under the zoo table"


def test_readme_s_documentation_section_links_every_page_of_docs():
    section = README.read_text(encoding="utf-8").partition("## Documentation")[2].partition("\n## ")[0]
    linked = {(README.parent / m["target"]).resolve() for m in LINK.finditer(section)}
    unlinked = [p.name for p in sorted((REPO / "docs").glob("*.md")) if p.resolve() not in linked]
    assert not unlinked, f"README.md's Documentation section links no {unlinked}"


def _json_table() -> dict[str, set[str]]:
    """The README's table of what ``--json`` prints: each command, as its row names it, with the words of its
    row's code spans (the keys, and the values it lists)."""
    section = README.read_text(encoding="utf-8").partition("## Scripts and CI")[2].partition("\n## ")[0]
    rows = re.findall(r"^\| `(vaezoo [^`]+)` \| (.*) \|$", section, re.MULTILINE)
    return {command: {word for span in re.findall(r"`([^`]+)`", cell) for word in re.findall(r"\w+", span)}
            for command, cell in rows}


def _keys(document) -> set[str]:
    """The keys of ``document``, an object or a list of objects."""
    return set().union(*(item.keys() for item in (document if isinstance(document, list) else [document])))


def test_the_scripts_section_names_every_key_each_json_prints(data_plugin, tmp_path, monkeypatch, capsys):
    from vaezoo.cli import build_parser

    monkeypatch.delenv("VAEZOO_LOAD_PLUGINS", raising=False)
    toy = write_card(tmp_path, make_card("toy"))
    assert main(["train", str(toy), "--out", str(tmp_path / "run")]) == 0
    (tmp_path / "cards").mkdir()
    (tmp_path / "cards" / "broken.toml").write_text("not [toml", encoding="utf-8")
    monkeypatch.setenv("VAEZOO_CARDS_PATH", str(tmp_path / "cards"))
    capsys.readouterr()

    def printed(*argv: str):
        main([*argv, "--json"])
        return json.loads(capsys.readouterr().out)

    spread = printed("seeds", "jointvae-mnist")
    shown = {
        "vaezoo list": _keys(printed("list")) | _keys(printed("list", "--group", "dataset")["mnist"]),
        "vaezoo list --skipped": _keys(printed("list", "--skipped")),
        "vaezoo info": {"path", "source"},  # and the card's own fields
        "vaezoo plugins": _keys(printed("plugins")),
        "vaezoo plugins --parts": _keys(printed("plugins", "--parts")),
        "vaezoo verify": _keys(printed("verify", "vae-mnist")),
        "vaezoo eval": _keys(printed("eval", str(tmp_path / "run"))) | _keys(
            printed("eval", str(tmp_path / "run"), "nosuch")),
        "vaezoo seeds": _keys(spread) | _keys(list(spread["metrics"].values()))
                        | _keys(spread["metrics"]["cluster_accuracy"]["runs"]),
        "vaezoo leaderboard": _keys(printed("leaderboard", "mig_chen")),
    }
    documented = _json_table()
    assert set(documented) == set(shown), "README.md's Scripts and CI table names other commands"
    for command, keys in shown.items():
        assert keys <= documented[command], f"README.md's --json table lacks {sorted(keys - documented[command])} " \
                                            f"of {command}"
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    with_json = {name for name, parser in sub.choices.items()
                 if any("--json" in a.option_strings for a in parser._actions)}
    assert with_json == {command.split()[1] for command in documented}


def test_contributing_s_table_of_card_keys_names_every_field_a_card_has():
    """Each field of a card (a plugin's section is the row `[NAME]` of a plugin), and in the `[train]` row each
    field of the recipe and of a machine it records."""
    from vaezoo.entries.schema import Card, InputSection, Machine, TrainRecipe

    text = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8")
    table = text.partition("Its keys:")[2].lstrip().partition("\n\n")[0]
    rows = re.findall(r"^\s*\| (.*?) \| (.*) \|$", table, re.MULTILINE)
    named = {word for key, _ in rows for word in re.findall(r"`\[?([a-z_]+)", key)}
    assert sorted(set(Card.model_fields) - {"sections"} - named) == [], "CONTRIBUTING's table of card keys lacks them"
    train = next(cell for key, cell in rows if key == "`[train]`")
    words = {word for span in re.findall(r"`([^`]+)`", train) for word in re.findall(r"\w+", span)}
    assert set(TrainRecipe.model_fields) | set(Machine.model_fields) <= words
    # a plugin's card of 28x28 MNIST, not resized, wrote interpolation = "none" and was skipped: the row named no value
    input_ = next(cell for key, cell in rows if key == "`[input]`")
    assert set(get_args(InputSection.model_fields["interpolation"].annotation)) <= set(re.findall(r"`(\w+)`", input_))


def test_the_environment_table_names_every_variable_vaezoo_reads():
    sources = [*(REPO / "vaezoo").rglob("*.py"), *(REPO / "plugins").rglob("*.py")]
    read = {name for path in sources for name in re.findall(r"VAEZOO_[A-Z_]+", path.read_text(encoding="utf-8"))}
    table = README.read_text(encoding="utf-8").partition("## Environment")[2].partition("\n## ")[0]
    listed = set(re.findall(r"^\| `(VAEZOO_[A-Z_]+)", table, re.MULTILINE))
    assert read and read <= listed, f"README.md's Environment table lacks {sorted(read - listed)}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(page):
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    targets = [m["target"] for m in LINK.finditer(text) if "://" not in m["target"]]
    missing = [t for t in targets if not (page.parent / t).exists()]
    assert not missing, f"{page.relative_to(REPO)} links to missing files: {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_links_to_a_heading_name_one_the_page_has(page):
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    broken = []
    for link in ANCHORED_LINK.finditer(text):
        target = page.parent / link["target"] if link["target"] else page
        if "://" not in link["target"] and target.suffix == ".md" and target.exists():
            if link["anchor"] not in heading_anchors(target):
                broken.append(link[0])
    assert not broken, f"{page.relative_to(REPO)} links to headings its targets lack: {broken}"


def _headings(page: Path) -> list[str]:
    """The page's headings outside code blocks, as ``"## Title"``."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return [line.strip() for line in text.splitlines() if re.match(r"#{1,6} ", line)]


def heading_anchors(page: Path) -> set[str]:
    """The anchors GitHub gives the page's headings: lower case, no punctuation, spaces as ``-``, a repeat ``-N``."""
    anchors, seen = set(), Counter()
    for heading in _headings(page):
        slug = re.sub(r"[^\w\- ]", "", heading.lstrip("#").strip().lower()).replace(" ", "-")
        anchors.add(f"{slug}-{seen[slug]}" if seen[slug] else slug)
        seen[slug] += 1
    return anchors


@pytest.mark.parametrize("page", ZOO_PAGES, ids=lambda p: p.name)
def test_every_zoo_page_follows_the_template_and_holds_no_history(page):
    headings = _headings(page)
    assert headings[0] == f"# {page.stem}", f"{page.name}: the title must be the entry's name"
    sections = [h[3:] for h in headings if h.startswith("## ")]
    assert sections == TEMPLATE, f"{page.name}: its ## headings are {sections}, not the template's {TEMPLATE}"
    assert not [h for h in headings if "history" in h.lower()], f"{page.name}: history goes to notes/"
    card = page.parents[2] / "zoo_cards" / f"{page.stem}.toml"
    assert card.exists(), f"{page.name} has no card zoo_cards/{card.name}"
    text = page.read_text(encoding="utf-8")
    assert f'vaezoo.load("{page.stem}"' in text and f"vaezoo eval {page.stem}" in text


# A path of the checkout in a command (plugins/..., zoo_cards/...): a user who installed vaezoo with pip has none.
CHECKOUT_PATH = re.compile(r"(?<![\w./-])(?:plugins|zoo_cards)/")


@pytest.mark.parametrize("page", ZOO_PAGES, ids=lambda p: p.name)
def test_zoo_page_commands_run_from_an_installed_vaezoo(page):
    commands = [line for b in code_blocks(page) if b.lang == "bash" and b.no_run is None
                for line in b.code.splitlines() if CHECKOUT_PATH.search(line.partition("#")[0])]
    assert not commands, f"{page.name}: {commands} name a path of the checkout; name the card by its zoo name"


def test_every_zoo_card_has_a_page():
    cards = {p.stem for p in (REPO / "zoo_cards").glob("*.toml")}
    assert cards == {p.stem for p in ZOO_PAGES}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_user_pages_hold_no_git_show_and_no_shared_path(page):
    text = page.read_text(encoding="utf-8")
    assert "git show" not in text and "../shared" not in text, \
        f"{page.relative_to(REPO)}: provenance commands and ../shared paths belong in notes/ (the notebook)"
