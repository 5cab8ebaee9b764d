"""Pictures of zoo cards: ``vaezoo show`` and the ``vaezoo gallery`` page, checked in headless Chromium.

The cards are tiny models written to a temporary directory on ``VAEZOO_CARDS_PATH``,
beside whatever cards the zoo itself holds; the gallery must show all of them.
"""

import html
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from kit import cli, make_card, write_card, write_entry
from PIL import Image

from vaezoo.cli import main
from vaezoo.entries.catalog import list_cards, parse_card
from vaezoo.entries.schema import Card
from vaezoo.errors import DataError
from vaezoo.extras.gallery import build_gallery, gallery
from vaezoo.terminal import printable

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
TRICKY_TEXT = 'a <b>bold</b> claim & an <img src="x.png"> "quoted" \x1b[31mred\r'
SHOWN_TEXT = 'a <b>bold</b> claim & an <img src="x.png"> "quoted" \\x1b[31mred\\r'  # control characters escaped
INF_NOTE = "the posterior collapsed: a part's KL is zero"
SPREAD = {"runs": [{"seed": 0, "value": 0.5}, {"seed": 1, "value": 0.7}, {"seed": 2, "value": float("inf")}],
          "n": 3, "median": 0.7, "min": 0.5, "max": float("inf"), "shipped": 0, "selection": "the recipe's seed",
          "command": "vaezoo seeds tiny runs/s1 runs/s2 --write"}


# A 16x16 joint latent (a style and a digit part), conv nets, no regularizer.
TINY_MODEL = {"image_size": 16, "channels": 1,
              "latent": {"type": "joint", "parts": [{"type": "gaussian", "name": "style", "dim": 3},
                                                    {"type": "gumbel_categorical", "name": "digit", "categories": 4}]},
              "encoder": {"type": "conv_encoder", "hidden": 32}, "decoder": {"type": "conv_decoder", "hidden": 32}}


def tiny_card(name: str, with_weights: bool, directory: Path) -> Card:
    """Write a tiny card (and, if asked, its random weights) with tricky text into ``directory``."""
    card = make_card(
        name=name, model=TINY_MODEL, summary=f"{name}: {TRICKY_TEXT}",
        paper="Kingma & Welling (2014), Auto-Encoding Variational Bayes",
        metrics={"reconstruction": {"value": 123.456789, "command": f"vaezoo eval {name} --json",
                                    "vaezoo_version": "0.1.0", "note": TRICKY_TEXT},
                 "kl_digit": {"value": 0.5, "command": f"vaezoo eval {name} --json && echo '<done>'",
                              "vaezoo_version": "0.1.0", "seeds": SPREAD},
                 "tc": {"value": float("inf"), "command": f"vaezoo eval {name}", "vaezoo_version": "0.1.0",
                        "note": INF_NOTE}})
    return parse_card(write_entry(directory, card)[0] if with_weights else write_card(directory, card))


@pytest.fixture
def tiny_zoo(tmp_path_factory, monkeypatch) -> dict[str, Card]:
    """Two tiny cards on VAEZOO_CARDS_PATH: ``tiny-trained`` with weights, ``tiny-untrained`` without."""
    directory = tmp_path_factory.mktemp("cards")
    cards = {name: tiny_card(name, name == "tiny-trained", directory) for name in ("tiny-trained", "tiny-untrained")}
    monkeypatch.setenv("VAEZOO_CARDS_PATH", str(directory))
    return cards


WIDTH = 1280  # the page must fit a window this wide


WRAPPER = """<!doctype html>
<html><body style="margin:0"><iframe id="page" src="{src}" style="width:{width}px;height:900px;border:0"></iframe>
<pre id="report"></pre>
<script>
document.getElementById("page").addEventListener("load", () => {{
  const doc = document.getElementById("page").contentDocument;
  const width = doc.documentElement.clientWidth;
  const describe = e => e.tagName.toLowerCase() + (e.className ? "." + e.className : "") + ": "
    + (e.textContent || e.getAttribute("src") || "").trim().slice(0, 80);
  const cards = [...doc.querySelectorAll("article[data-card]")].map(card => ({{
    name: card.dataset.card,
    text: card.textContent,
    shared_command: (card.querySelector(".shared-command") || {{}}).textContent || null,
    metrics: [...card.querySelectorAll("tr[data-metric]")].map(row => ({{
      name: row.dataset.metric,
      value: row.querySelector(".value").textContent,
      command: (row.querySelector(".command") || {{}}).textContent || null,
      text: row.textContent,
    }})),
    images: [...card.querySelectorAll("img")].map(img => ({{
      src: img.src, alt: img.alt, complete: img.complete, width: img.naturalWidth, height: img.naturalHeight,
    }})),
  }}));
  const boards = [...doc.querySelectorAll("section.board")].map(board => ({{
    dataset: board.dataset.dataset,
    text: board.textContent,
    headers: [...board.querySelectorAll("table.leaderboard th")].map(th => th.textContent),
    wrapped: [...board.querySelectorAll("table.leaderboard td")].filter(td => td.getClientRects().length > 1
      || td.offsetHeight > 2 * parseFloat(getComputedStyle(td).fontSize) + 8).map(td => td.textContent),
    images: [...board.querySelectorAll("img")].map(img => ({{
      src: img.src, alt: img.alt, complete: img.complete, width: img.naturalWidth,
    }})),
  }}));
  const overview = [...doc.querySelectorAll(".overview img")].map(img => ({{src: img.src, alt: img.alt}}));
  const overflowing = [...doc.querySelectorAll("body *")]
    .filter(e => !(e.parentElement && e.parentElement.closest(".scroll")))  // what scrolls in its own box fits it
    .filter(e => e.getBoundingClientRect().right > width + 0.5 || e.getBoundingClientRect().left < -0.5)
    .map(describe);
  const urls = [...doc.querySelectorAll("[src], [href]")].map(e => e.src || e.href);
  document.getElementById("report").textContent = JSON.stringify({{
    cards, boards, overview, urls, overflowing, width, scroll_width: doc.documentElement.scrollWidth,
    alts: [...doc.images].map(img => img.alt), scripts: doc.scripts.length}});
}});
</script></body></html>
"""


def browse(index: Path, work: Path) -> dict:
    """Open ``index`` from disk in headless Chromium and report what the page holds and which images loaded.

    A wrapper page loads the gallery in an iframe and reads its DOM once every image has
    loaded or failed; ``--allow-file-access-from-files`` lets one file page read another.
    """
    wrapper = work / "wrapper.html"
    wrapper.write_text(WRAPPER.format(src=index.resolve().as_uri(), width=WIDTH), encoding="utf-8")
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
               "--disable-component-update", "--disable-sync", "--no-first-run", "--allow-file-access-from-files",
               f"--user-data-dir={work / 'chromium-profile'}", "--virtual-time-budget=10000",
               f"--window-size={WIDTH + 100},1000",
               "--dump-dom", wrapper.as_uri()]
    dom = subprocess.run(command, capture_output=True, text=True, timeout=120, check=True).stdout
    report = re.search(r'<pre id="report">(.*?)</pre>', dom, re.S)
    assert report and report.group(1), f"the wrapper page did not report on the gallery; DOM:\n{dom[:2000]}"
    return json.loads(html.unescape(report.group(1)))


def check_gallery_in_browser(index: Path, work: Path) -> dict:
    """Every discovered card, metric and image is on the page, every image loads with its file's size and has
    alt text, and nothing overflows a 1280-pixel window."""
    report = browse(index, work)
    directory = index.parent.resolve()
    assert report["scripts"] == 0
    assert report["width"] <= WIDTH and report["scroll_width"] <= report["width"], report["overflowing"]
    assert report["overflowing"] == []
    assert all(alt.strip() for alt in report["alts"])
    assert all(url.startswith(directory.as_uri()) for url in report["urls"]), report["urls"]
    shown = {card["name"]: card for card in report["cards"]}
    cards = list_cards()
    assert list(shown) == [card.name for card in cards]
    for card in cards:
        page = shown[card.name]
        for text in (card.summary, card.architecture, card.dataset, card.paper):
            assert printable(text) in page["text"], f"{card.name}: '{text}' is not on the page"
        assert {m["name"] for m in page["metrics"]} == set(card.metrics)
        for metric in page["metrics"]:
            on_card = card.metrics[metric["name"]]
            assert float(metric["value"]) == pytest.approx(on_card.value, rel=1e-5, nan_ok=True)  # a NaN shows as NaN
            assert (metric["command"] or page["shared_command"]) == on_card.command
            assert printable(on_card.note or "") in metric["text"]
        if card.weights is None:
            assert page["images"] == []
            assert "No pretrained weights" in page["text"]
            continue
        expected = {(directory / f"{card.name}.{kind}.png").as_uri() for kind in ("traverse", "sample")}
        assert {image["src"] for image in page["images"]} == expected
        assert {image["alt"] for image in page["images"]} >= {f"100 samples of {card.name} from the prior"}
        for image in page["images"]:
            with Image.open(directory / Path(image["src"]).name) as png:
                assert image["complete"] and (image["width"], image["height"]) == png.size, image
    for board in report["boards"]:
        for image in board["images"]:
            assert image["complete"] and image["width"] > 0, image
    return report


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian package 'chromium')")
def test_gallery_shows_every_card_metric_and_image_in_a_browser(tiny_zoo, tmp_path):
    index = build_gallery(tmp_path / "site", use_data=False)
    report = check_gallery_in_browser(index, tmp_path)
    shown = {card["name"]: card for card in report["cards"]}
    assert {"tiny-trained", "tiny-untrained"} <= set(shown)
    trained = shown["tiny-trained"]["text"]
    assert "gaussian(3) + categorical(4)" in trained
    assert "in the latent's order (drawn without data)" in trained
    assert "vaezoo show tiny-trained traverse -o tiny-trained.traverse.png --n 10 --no-data" in trained
    assert SHOWN_TEXT in shown["tiny-untrained"]["text"]
    assert {image["alt"] for image in report["overview"]} >= {"thumbnail of the latent traversal of tiny-trained"}

    boards = {board["dataset"]: board for board in report["boards"]}
    mnist = boards["mnist"]
    assert f"tiny-trained, tc = inf: {INF_NOTE}" in mnist["text"]  # a non-finite value with its note
    assert {"seed distribution of kl_digit on mnist"} <= {image["alt"] for image in mnist["images"]}
    assert "tiny-trained (1 non-finite)" in (index.parent / "seeds-mnist-kl_digit.svg").read_text()
    assert "tc" in mnist["headers"]  # full metric names
    assert not any(board["wrapped"] for board in boards.values())  # each number on one line


@pytest.mark.slow
def test_gallery_escapes_card_text(tiny_zoo, tmp_path):
    page = build_gallery(tmp_path / "site", use_data=False).read_text(encoding="utf-8")
    assert "a &lt;b&gt;bold&lt;/b&gt; claim &amp; an &lt;img src=" in page
    assert "<b>bold</b>" not in page and '<img src="x.png">' not in page and "'<done>'" not in page
    assert "\\x1b[31mred\\r" in page and not any(c in page for c in "\x1b\r")


def test_a_card_skipped_for_its_own_problem_keeps_its_leaderboard_row_without_a_link_to_nowhere(tiny_zoo, tmp_path,
                                                                                                 monkeypatch, capsys):
    """A card whose pictures cannot be drawn (a plugin's family that cannot be traversed, weights that fail their
    sha256) is left off the page, and its leaderboard row linked to an anchor the page did not have."""
    from vaezoo.errors import LatentError
    from vaezoo.extras import gallery as module

    def refused(card, device=None):
        raise LatentError("latent family Box (box): its prior, Beta, has no icdf")

    monkeypatch.setattr(module, "load_model", refused)
    page = build_gallery(tmp_path / "site", use_data=False).read_text(encoding="utf-8")
    assert "card tiny-trained" in capsys.readouterr().err and 'id="tiny-trained"' not in page
    assert "<tr><td>tiny-trained</td>" in page and 'href="#tiny-trained"' not in page
    assert '<tr><td><a href="#tiny-untrained">tiny-untrained</a></td>' in page


@pytest.mark.slow
def test_gallery_overwrites_its_own_page_but_never_another_index_html(tiny_zoo, tmp_path, capsys):
    site = tmp_path / "site"
    first = build_gallery(site, use_data=False).read_bytes()
    assert build_gallery(site, use_data=False).read_bytes() == first
    capsys.readouterr()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "index.html").write_text("<html>my own page</html>")
    assert main(["gallery", str(mine), "--no-data"]) == 1
    err = capsys.readouterr().err
    assert err == f"error: {mine / 'index.html'} exists and is not a page vaezoo gallery wrote; give a new or " \
                  "empty folder, or move that file away\n"
    assert [p.name for p in mine.iterdir()] == ["index.html"]
    assert (mine / "index.html").read_text() == "<html>my own page</html>"
    code, _, err = cli(capsys, "gallery", "  ", "--no-data")
    assert code == 2 and err.splitlines()[-1] == "vaezoo gallery: error: argument DIR: give a path, not an empty string"


@pytest.mark.slow
def test_a_gallery_cut_short_leaves_the_gallery_there_as_it_was(tiny_zoo, tmp_path, monkeypatch):
    """A second gallery with other samples is stopped after drawing its first card: before, that card's new
    pictures stood beside the old page."""
    from vaezoo.extras import gallery

    site = tmp_path / "site"
    build_gallery(site, use_data=False, samples=10)
    before = {p.name: p.read_bytes() for p in site.iterdir()}
    drawn = []
    draw = gallery._Painter.entry

    def stopped_after_one(self, card):
        if drawn:
            raise KeyboardInterrupt
        drawn.append(draw(self, card))
        return drawn[-1]

    monkeypatch.setattr(gallery._Painter, "entry", stopped_after_one)
    with pytest.raises(KeyboardInterrupt):
        build_gallery(site, use_data=False, samples=20)
    assert drawn and drawn[0].pictures  # the first card was drawn again, with other samples
    assert {p.name: p.read_bytes() for p in site.iterdir()} == before
    monkeypatch.setattr(gallery._Painter, "entry", draw)
    killed = site / ".gallery.k1ll3d00.tmp"  # what a gallery killed (SIGKILL) midway leaves (mkdtemp's name)
    killed.mkdir()
    (killed / "tiny-trained.sample.png").write_bytes(b"half")
    build_gallery(site, use_data=False, samples=20)
    assert (site / "tiny-trained.sample.png").read_bytes() != before["tiny-trained.sample.png"]
    assert not [p for p in site.iterdir() if p.name.startswith(".gallery.")]


def test_the_temporary_files_of_a_gallery_killed_while_moving_its_files_in_are_removed_by_the_next(tiny_zoo,
                                                                                                     tmp_path):
    """A gallery killed once its pictures were in place, writing its page, left the page's temporary file, and
    the next gallery never removed it (nor those of its pictures and record)."""
    site = tmp_path / "site"
    killed = subprocess.run([sys.executable, "-c", (
        "import os, signal\n"
        "import vaezoo.store.files as files\n"
        "from vaezoo.extras.gallery import build_gallery\n"
        "real = files.commit\n"
        "def commit(staged, *args):\n"
        "    if staged[0][1].name == 'index.html':\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        "    return real(staged, *args)\n"
        "files.commit = commit\n"
        f"build_gallery({str(site)!r}, use_data=False)\n")], capture_output=True, text=True, timeout=300)
    assert killed.returncode == -9, killed.stderr
    assert [p.name for p in site.iterdir() if p.name.startswith(".index.html.")]  # what the killed gallery left
    build_gallery(site, use_data=False)
    assert [p.name for p in site.iterdir() if p.name.endswith(".tmp")] == []


def test_a_gallery_lists_its_folder_as_often_whatever_the_cards_it_draws(tiny_zoo, tmp_path, monkeypatch):
    """The temporary files killed galleries left are looked for in one listing of the folder: one listing per
    picture, page and record made a gallery of 5,000 cards list its folder of 10,000 pictures 10,000 times."""
    import os

    listings = []
    listdir = os.listdir
    monkeypatch.setattr(os, "listdir", lambda path=".": listings.append(Path(path)) or listdir(path))
    left = [tmp_path / "site" / ".tiny-trained.sample.png.abcd_123.tmp", tmp_path / "site" / ".index.html.zz9y8x7w.tmp"]
    kept = tmp_path / "site" / ".tiny-trained.sample.png.abcd_1234.tmp"
    for path in [*left, kept]:
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"")
    build_gallery(tmp_path / "site", use_data=False)
    assert not any(path.exists() for path in left) and kept.exists()
    few = listings.count(tmp_path / "site")
    for name in ("tiny-more-1", "tiny-more-2", "tiny-more-3"):
        tiny_card(name, True, tiny_zoo["tiny-trained"].path.parent)
    listings.clear()
    build_gallery(tmp_path / "site", use_data=False)
    assert listings.count(tmp_path / "site") == few


@pytest.mark.slow
def test_gallery_images_match_vaezoo_show(tiny_zoo, tmp_path):
    site = tmp_path / "site"
    assert main(["gallery", str(site), "--no-data"]) == 0
    assert main(["show", "tiny-trained", "sample", "-o", str(tmp_path / "s.png"), "--n", "100"]) == 0
    assert main(["show", "tiny-trained", "traverse", "-o", str(tmp_path / "t.png"), "--no-data"]) == 0
    assert (tmp_path / "s.png").read_bytes() == (site / "tiny-trained.sample.png").read_bytes()
    assert (tmp_path / "t.png").read_bytes() == (site / "tiny-trained.traverse.png").read_bytes()
    assert not (site / "tiny-untrained.sample.png").exists()


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (Debian package 'chromium')")
def test_gallery_with_test_images_orders_rows_by_kl(tiny_zoo, tmp_path, mnist_root):
    index = build_gallery(tmp_path / "site", data_root=mnist_root, seed=1)
    shown = {card["name"]: card for card in check_gallery_in_browser(index, tmp_path)["cards"]}
    assert "ordered by KL averaged over 1000 test images (seed 1)" in shown["tiny-trained"]["text"]


def test_the_traversals_command_on_the_page_does_not_depend_on_the_terminals_encoding(tiny_zoo, tmp_path,
                                                                                      monkeypatch):
    """Under PYTHONIOENCODING=ascii the page said '--data-root $'d\\xc3\\xa9'' of the data folder 'dé'."""
    import io
    import shlex

    import torch

    from vaezoo.assemble import build_model
    from vaezoo.extras.gallery import _Painter

    for stream in ("stdout", "stderr"):
        monkeypatch.setattr(sys, stream, io.TextIOWrapper(io.BytesIO(), encoding="ascii"))
    card, root = tiny_zoo["tiny-trained"], str(tmp_path / "d\u00e9")
    painter = _Painter(tmp_path, root, True, None, 0, 3, 4, 1)
    monkeypatch.setattr(painter, "_test_images", lambda card: torch.rand(4, 1, 16, 16))
    _, picture = painter._traversal(card, build_model(card).eval())
    assert picture.command.endswith(f" --data-root {shlex.quote(root)}"), picture.command


def test_show_draws_each_picture_at_its_promised_size(tiny_zoo, tmp_path, mnist_root, capsys):
    tile, padding = 16 * 3, 2
    for what, rows, columns in (("sample", 2, 5), ("reconstruct", 4, 5)):
        out = tmp_path / f"{what}.png"
        argv = ["show", "tiny-trained", what, "-o", str(out), "--n", "10", "--columns", "5", "--scale", "3",
                "--data-root", str(mnist_root)]
        assert main(argv) == 0
        assert capsys.readouterr().out.strip() == str(out)
        width, height = Image.open(out).size
        assert height == rows * (tile + padding) + padding
        grid_width = columns * (tile + padding) + padding
        assert width == grid_width if what == "sample" else width > grid_width
    out = tmp_path / "traverse.png"
    assert main(["show", "tiny-trained", "traverse", "-o", str(out), "--n", "6", "--span", "-2", "2",
                 "--data-root", str(mnist_root)]) == 0
    assert "rows ordered by KL averaged over 1000 test images (seed 0)" in capsys.readouterr().err
    assert Image.open(out).height == 4 * (16 * 2 + padding) + padding


@pytest.mark.parametrize("argv, message", [
    (["show", "tiny-untrained", "sample", "-o", "x.png"],
     "card 'tiny-untrained' has no weights; train it with 'vaezoo train'"),
    (["show", "tiny-trained", "sample", "-o", "x.jpg"], "give a .png file name, not 'x.jpg'"),
    (["show", "tiny-trained", "sample", "-o", "folder/"], "give a .png file name, not 'folder/'"),
    (["gallery", "a-file/site", "--only-seeds"], "a-file is a file, not a folder; choose another output path"),
    (["show", "tiny-trained", "reconstruct", "-o", "x.png", "--no-data"], "reconstruct needs test images"),
    (["show", "tiny-trained", "traverse", "-o", "x.png", "--n", "1", "--no-data"], "at least 2 steps"),
    (["show", "tiny-trained", "traverse", "-o", "x.png", "--fold-below", "0.01", "--no-data"],
     "--fold-below folds traversal rows by their KL over test images"),
    (["show", "no-such-model", "sample", "-o", "x.png"], "no zoo card named 'no-such-model'"),
])
def test_show_errors_are_one_line(tiny_zoo, tmp_path, monkeypatch, capsys, argv, message):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a-file").write_text("mine")
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert [p.name for p in tmp_path.iterdir()] == ["a-file"] and (tmp_path / "a-file").read_text() == "mine"


@pytest.mark.slow
def test_gallery_never_replaces_a_picture_it_did_not_write(tiny_zoo, tmp_path, capsys):
    """Without a gallery page, a user's own NAME.sample.png is refused before anything is drawn; a page the
    gallery wrote lets it redraw the pictures that page shows."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "tiny-trained.sample.png").write_bytes(b"my own picture")
    assert main(["gallery", str(site), "--no-data"]) == 1
    err = capsys.readouterr().err
    assert err == (f"error: {site} already holds tiny-trained.sample.png, which vaezoo gallery did not write; "
                   f"give a new or empty folder, or move them away\n")
    assert sorted(p.name for p in site.iterdir()) == ["tiny-trained.sample.png"]
    assert (site / "tiny-trained.sample.png").read_bytes() == b"my own picture"
    (site / "tiny-trained.sample.png").unlink()
    build_gallery(site, use_data=False)
    build_gallery(site, use_data=False)  # its own pictures, shown by its own page: redrawn
    assert {"index.html", "tiny-trained.sample.png", "tiny-trained.traverse.png"} <= {p.name for p in site.iterdir()}


EARLIER_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>vaezoo gallery</title>
<style>
  body { font-family: system-ui, sans-serif; max-width: 72rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
  img { max-width: 100%; image-rendering: pixelated; }
</style>
</head>
<body>
<header>
  <h1>vaezoo gallery</h1>
  <p>2 models in the zoo, drawn with vaezoo 0.1.0.</p>
  <nav>
    <a href="#tiny-trained">tiny-trained</a>
  </nav>
</header>
<article id="tiny-trained">
  <figure>
    <img src="tiny-trained.traverse.png" alt="Latent traversal of tiny-trained">
  </figure>
  <figure>
    <img src="tiny-trained.sample.png" alt="Samples of tiny-trained">
  </figure>
</article>
</body>
</html>
"""
"""The page vaezoo gallery wrote before its pages carried a generator tag (2026-11-25), as it began."""


def test_gallery_overwrites_the_page_and_pictures_an_earlier_vaezoo_gallery_wrote(tiny_zoo, tmp_path, capsys):
    # the folder of a gallery drawn before the page had its generator tag was refused as "not a page vaezoo gallery
    # wrote", so that the user's gallery could not be drawn again where it was
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text(EARLIER_PAGE)
    for kind in ("traverse", "sample"):
        (site / f"tiny-trained.{kind}.png").write_bytes(b"drawn by the earlier gallery")
    assert main(["gallery", str(site), "--no-data"]) == 0, capsys.readouterr().err
    assert 'content="vaezoo gallery ' in (site / "index.html").read_text()
    assert (site / "tiny-trained.sample.png").read_bytes().startswith(b"\x89PNG")
    (site / "index.html").write_text(EARLIER_PAGE.replace("<h1>vaezoo gallery</h1>", "<h1>my gallery</h1>"))
    assert main(["gallery", str(site), "--no-data"]) == 1
    assert "is not a page vaezoo gallery wrote" in capsys.readouterr().err


@pytest.mark.slow
def test_gallery_removes_the_pictures_an_earlier_gallery_drew_of_cards_it_no_longer_draws(tiny_zoo, tmp_path,
                                                                                         monkeypatch):
    """A card that left the zoo kept its pictures in the gallery's folder: they are removed once the new page is
    in; a user's own file, and a picture the user replaced, stay. A gallery cut short while moving its files in
    leaves the old page with every file it shows, and what it moved in is the gallery's for the next run."""
    from vaezoo import plugins
    from vaezoo.extras import gallery

    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", "core")  # the tiny cards only: the zoo's are not drawn
    plugins.reset()
    cards = tiny_zoo["tiny-trained"].path.parent

    def leave(name: str) -> None:
        for suffix in (".toml", ".safetensors"):
            (cards / f"{name}{suffix}").unlink()

    tiny_card("tiny-leaving", True, cards)
    site = tmp_path / "site"
    build_gallery(site, use_data=False, samples=10)
    plots = {p.name for p in site.glob("*.svg")}
    (site / "notes.txt").write_text("mine")
    (site / "tiny-leaving.sample.png").write_bytes(b"my own picture, in place of the gallery's")
    leave("tiny-leaving")
    build_gallery(site, use_data=False, samples=10)
    assert {p.name for p in site.iterdir() if not p.name.startswith(".")} == {
        "index.html", "notes.txt", "tiny-leaving.sample.png", "tiny-trained.sample.png", "tiny-trained.traverse.png",
        *plots}
    assert (site / "notes.txt").read_text() == "mine" and "tiny-leaving" not in (site / "index.html").read_text()
    assert (site / "tiny-leaving.sample.png").read_bytes().startswith(b"my own picture")

    leave("tiny-trained")
    tiny_card("tiny-joining", True, cards)
    old_page = (site / "index.html").read_bytes()
    shown = gallery._files_of_page(site / "index.html")
    moved, move = [], gallery._move

    def stopped_before_the_last(drawn, target):
        if target.name == "tiny-joining.traverse.png":
            raise KeyboardInterrupt
        moved.append(target.name)
        move(drawn, target)

    with monkeypatch.context() as patched:
        patched.setattr(gallery, "_move", stopped_before_the_last)
        with pytest.raises(KeyboardInterrupt):
            build_gallery(site, use_data=False, samples=10)
    assert "tiny-joining.sample.png" in moved and (site / "index.html").read_bytes() == old_page
    assert "tiny-trained.traverse.png" in shown and all((site / name).exists() for name in shown)

    build_gallery(site, use_data=False, samples=10)  # what the cut-short run moved in is not refused as foreign
    assert {p.name for p in site.iterdir() if not p.name.startswith(".")} == {
        "index.html", "notes.txt", "tiny-leaving.sample.png", "tiny-joining.sample.png", "tiny-joining.traverse.png",
        *plots}


def test_only_seeds_writes_each_seed_distribution_and_never_a_file_it_did_not_write(tiny_zoo, tmp_path, capsys):
    out = tmp_path / "docs"
    assert main(["gallery", str(out), "--only-seeds"]) == 0
    written = [Path(line) for line in capsys.readouterr().out.splitlines()]
    assert out / "seeds-mnist-kl_digit.svg" in written and not (out / "index.html").exists()
    svg = (out / "seeds-mnist-kl_digit.svg").read_text()
    assert 'aria-label="seed distribution of kl_digit on mnist"' in svg
    assert svg.count("<circle") == 4  # two entries, two finite seeds each
    assert "<title>median 0.7</title>" in svg and "<title>seed 1: 0.7</title>" in svg
    assert main(["gallery", str(out), "--only-seeds"]) == 0  # its own files: written again
    capsys.readouterr()
    (out / "seeds-mnist-kl_digit.svg").write_text("<svg>mine</svg>")
    assert main(["gallery", str(out), "--only-seeds"]) == 1
    assert capsys.readouterr().err == (f"error: {out} already holds seeds-mnist-kl_digit.svg, which vaezoo did not "
                                       f"write; give another folder, or move them away\n")


def test_a_seed_distribution_of_text_with_control_characters_is_well_formed_svg():
    """A metric named after a plugin's latent part (``kl_PART``) or a card's dataset may hold control characters,
    which XML does not allow: the SVG writes them as escapes, so that a browser still shows the picture."""
    from xml.dom.minidom import parseString

    from vaezoo.extras.seedplot import SeedPlot, Strip

    plot = SeedPlot("mnist\x07", "kl_<b>p\x1b[31m", (Strip("tiny", ((0, 0.5), (1, 0.7)), 0.6, 0, 0),))
    svg = plot.svg()
    parseString(svg)
    assert "kl_&lt;b&gt;p\\x1b[31m on mnist\\x07</text>" in svg


def test_traversal_folds_inactive_dimensions_and_labels_rows_legibly():
    import numpy as np
    import torch

    from vaezoo.evaluation.viz import Traversal, TraversalRow, fold_inactive

    kls = [2.0, 0.5, 0.004, 0.0]
    rows = tuple(TraversalRow("z", i, slice(i, i + 1), kl) for i, kl in enumerate(kls))
    traversal = Traversal(tiles=torch.rand(4, 3, 1, 16, 16), labels=tuple(r.label for r in rows), dimensions=rows)
    kept, folded = fold_inactive(traversal)
    assert [r.kl for r in kept.dimensions] == [2.0, 0.5] and [r.kl for r in folded] == [0.004, 0.0]
    assert kept.tiles.shape[0] == 2 and kept.labels == ("z[0]  KL 2.00", "z[1]  KL 0.50")
    assert len(fold_inactive(traversal, min_kl=10.0)[0].dimensions) == 1  # never an empty picture

    picture = kept.to_pil(scale=2)
    ink = torch.from_numpy(np.asarray(picture.convert("L")).copy()) < 128
    margin = picture.width - kept.image(scale=2).shape[2]
    first_row = ink[: 16 * 2 + 2, :margin].any(1).nonzero()
    assert first_row.max() - first_row.min() >= 9  # the label's glyphs stand at least 9 pixels high


def test_the_seed_distributions_in_docs_zoo_are_what_the_command_draws(monkeypatch, tmp_path):
    from vaezoo.extras.gallery import build_seed_plots

    monkeypatch.delenv("VAEZOO_CARDS_PATH", raising=False)
    docs = Path(__file__).resolve().parents[1] / "docs" / "zoo"
    for path in build_seed_plots(tmp_path):
        assert (docs / path.name).read_bytes() == path.read_bytes(), \
            f"docs/zoo/{path.name} is stale: run 'vaezoo gallery docs/zoo --only-seeds'"


def test_a_second_gallery_loads_no_dataset_and_its_bar_times_drawing_alone(tiny_zoo, tmp_path, monkeypatch,
                                                                          mnist_root):
    """The test images a traversal averages its KL over are kept in vaezoo's cache: a second gallery over the same
    zoo loads no dataset and draws the same pictures; another seed, or an unreadable cached file, loads it again.
    The images are loaded before the cards' bar opens, so its time left measures drawing alone."""
    from vaezoo import plugins
    from vaezoo.extras import gallery

    monkeypatch.setenv("VAEZOO_LOAD_PLUGINS", "core")  # the tiny cards only
    plugins.reset()
    events = []
    load, bar = gallery.card_dataset, gallery.progress
    monkeypatch.setattr(gallery, "card_dataset", lambda *a, **k: events.append("load") or load(*a, **k))
    monkeypatch.setattr(gallery, "progress", lambda name, *a, **k: events.append(f"bar {name}") or bar(name, *a, **k))
    site = tmp_path / "site"
    build_gallery(site, data_root=mnist_root, samples=10)
    assert events == ["load", "bar gallery"]
    first = (site / "tiny-trained.traverse.png").read_bytes()
    assert "ordered by KL averaged over 1000 test images (seed 0)" in (site / "index.html").read_text()

    events.clear()
    build_gallery(site, data_root=mnist_root, samples=10)
    assert events == ["bar gallery"] and (site / "tiny-trained.traverse.png").read_bytes() == first

    events.clear()
    build_gallery(site, data_root=mnist_root, samples=10, seed=1)
    assert events == ["load", "bar gallery"]
    for cached in gallery.test_images_cache().iterdir():
        cached.write_bytes(b"not safetensors")
    events.clear()
    build_gallery(site, data_root=mnist_root, samples=10)
    assert events == ["load", "bar gallery"] and (site / "tiny-trained.traverse.png").read_bytes() == first


def test_leaderboard_marks_losses_measured_under_different_likelihoods_or_data(tmp_path):
    """Losses of cards on other data (image size) or another likelihood are marked apart; other metrics are not,
    and cards measured alike get no marks. The page names every metric in full and never wraps a number."""
    from vaezoo.extras.gallery import _boards, _template

    def card(name, image_size, likelihood="bernoulli"):
        model = {**TINY_MODEL, "image_size": image_size, "likelihood": likelihood}
        metrics = {m: {"value": v, "command": f"vaezoo eval {name}", "vaezoo_version": "0.1.0"}
                   for m, v in (("reconstruction", 152.2 if image_size == 32 else 86.67), ("mutual_info_score", 0.1))}
        return parse_card(write_card(tmp_path, make_card(name=name, model=model, metrics=metrics)))

    big, small, other = card("big", 32), card("small", 16), card("other", 16, "gaussian")
    board, = _boards([big, small], [])
    assert board.columns == ("mutual_info_score", "reconstruction")
    cells = {name: {m: c for m, c in zip(board.columns, row)} for name, row in board.rows}
    assert cells["big"]["reconstruction"].mark != cells["small"]["reconstruction"].mark
    assert {cells[n]["mutual_info_score"].mark for n in cells} == {""}
    assert [measure for _, measure in board.marks] == [
        'bernoulli likelihood on mnist ({"image_size": 32})', 'bernoulli likelihood on mnist ({"image_size": 16})'] \
        or [measure for _, measure in board.marks] == [
        'bernoulli likelihood on mnist ({"image_size": 16})', 'bernoulli likelihood on mnist ({"image_size": 32})']
    assert len({mark for mark, _ in _boards([small, other], [])[0].marks}) == 2
    alike, = _boards([small, card("small-2", 16)], [])
    assert not alike.marks and {c.mark for _, row in alike.rows for c in row} == {""}
    page = _template().render(entries=[], boards=[board], generator="g", version="0")
    assert "<th>mutual_info_score</th>" in page and "white-space: nowrap" in page
    assert "compare them only between cards of one mark" in page


@pytest.mark.parametrize("root", ["missing", "a-file"])
def test_gallery_refuses_a_data_root_that_is_no_folder_before_drawing(cards, tmp_path, capsys, root):
    # 'gallery DIR --data-root /nonexistent' exited 0, its page saying MNIST "is not on the machine"
    (tmp_path / "a-file").write_text("mine")
    why = "is a file, not a folder" if root == "a-file" else "does not exist"
    assert cli(capsys, "gallery", str(tmp_path / "site"), "--data-root", str(tmp_path / root)) == (
        1, "", f"error: --data-root {tmp_path / root} {why}; give the folder holding the datasets, or leave it out "
               f"to read them from VAEZOO_DATA or the default data folder\n")
    with pytest.raises(DataError, match=f"^data_root {re.escape(str(tmp_path / root))} {why}; "):  # from Python too
        gallery(tmp_path / "site", data_root=tmp_path / root)
    assert not (tmp_path / "site").exists()


@pytest.mark.parametrize("held", ["tiny-blobs.toml", "checkpoint.pt"])
@pytest.mark.parametrize("only_seeds", [[], ["--only-seeds"]])
def test_gallery_refuses_a_run_s_folder_and_writes_nothing_there(cards, tmp_path, capsys, held, only_seeds):
    # 'vaezoo gallery runs/s0' wrote the zoo's page and pictures among the run's card and weights
    run = tmp_path / "s0"
    run.mkdir()
    if held == "checkpoint.pt":
        (run / held).write_bytes(b"the run's")
    else:
        write_card(run, make_card("tiny", model=TINY_MODEL))
    assert cli(capsys, "gallery", str(run), *only_seeds) == (
        1, "", f"error: {run} holds {held}, a run's or a zoo's folder; the gallery's page and pictures go in a "
               f"folder of their own: give a new one, e.g. {run / 'gallery'}\n")
    assert [p.name for p in run.iterdir()] == [held]


def test_gallery_writes_beside_toml_files_that_are_no_cards(cards, tmp_path):
    write_card(cards, make_card(name="tiny"))  # a zoo of no card is refused
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "mine"\n')
    written = gallery(tmp_path, only_seeds=True)
    assert all(path.parent == tmp_path for path in written)
    assert (tmp_path / "pyproject.toml").read_text() == '[project]\nname = "mine"\n'


def test_a_full_disk_names_the_picture_where_the_gallery_puts_it_not_its_hidden_staging_folder(
        tiny_zoo, tmp_path, monkeypatch, capsys):
    """The error named DIR/.gallery.XXXXXXXX.tmp/NAME.png, a folder removed as the gallery stopped."""
    import errno

    def full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Image.Image, "save", full)
    site = tmp_path / "site"
    assert main(["gallery", str(site), "--no-data"]) == 1
    err = capsys.readouterr().err
    assert re.fullmatch(rf"error: cannot write {re.escape(str(site))}/[a-z0-9.-]+\.traverse\.png: No space left on "
                        rf"device; choose another output path\n", err), err
    assert not site.exists()
