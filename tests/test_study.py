"""The dSprites study (vaezoo.extras.study): its shipped table is the cards', its numbers and figures are the
command's, and its analyses give the answers known for synthetic tables."""

from __future__ import annotations

import math
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from vaezoo.cli import build_parser, main
from vaezoo.entries.catalog import get_card
from vaezoo.extras.study import (
    DSPRITES, GRID_DEPENDENT, SEEDS, StudyError, StudyRow, StudyTable, build_study, distribution_plots, fill_doc,
    grid_spans, median_seed, mig_figure, place_among_seeds, read_table, render_sections, rule_metric, selection_check,
    study_table, variance_shares, write_table)

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "docs" / "study" / "dsprites.csv"
PAGE = REPO / "docs" / "study.md"


def test_the_shipped_table_holds_every_seed_the_cards_record_and_each_value_is_the_cards():
    table = read_table(SHIPPED)
    cards = {name: get_card(name) for name in {row.card for row in table.rows}}
    assert set(cards) == set(DSPRITES.entries())
    for row in table.rows:
        card = cards[row.card]
        assert row.steps == card.train.steps and row.precision == card.train.precision
        for metric, value in row.metrics.items():
            recorded = card.metrics[metric]
            if recorded.seeds is not None:
                assert value == next(run.value for run in recorded.seeds.runs if run.seed == row.seed)
            else:
                assert row.shipped and _same(value, recorded.value)
    for name, card in cards.items():
        for metric, recorded in card.metrics.items():
            for run in recorded.seeds.runs if recorded.seeds else ():
                [row] = [r for r in table.rows if r.card == name and r.seed == run.seed]
                assert row.metrics[metric] == run.value and row.shipped == (run.seed == recorded.seeds.shipped)
    released = [row for row in table.rows if row.method == DSPRITES.original]
    assert len(released) == 1 and released[0].seed is None


def _same(a: float, b: float) -> bool:
    """Equal, or both NaN (a card records a metric that could not be computed as NaN)."""
    return a == b or (a != a and b != b)


def test_the_table_reads_back_as_written(tmp_path):
    write_table(read_table(SHIPPED), tmp_path / "t.csv")
    assert (tmp_path / "t.csv").read_bytes() == SHIPPED.read_bytes()


def _run_of(name: str, seed: int, run_name: str):
    """A run folder's card of ``name``'s recipe with ``seed``: the card's own values, no spreads."""
    card = get_card(name)
    metrics = {k: v.model_copy(update={"seeds": None}) for k, v in card.metrics.items()}
    return card.model_copy(update={"name": run_name, "metrics": metrics,
                                   "train": card.train.model_copy(update={"seed": seed})})


def test_a_run_folders_card_joins_its_cell_and_a_seed_given_twice_is_refused():
    zoo = get_card("betavae-dsprites")
    table = study_table([zoo, _run_of("betavae-dsprites", 3, "betavae-dsprites-run")])
    cell = table.cells()[("betavae", 6.0)]
    assert [r.seed for r in cell] == [0, 1, 2, 3]
    assert cell[3].metrics["mig_dlib"] == zoo.metrics["mig_dlib"].value and not cell[3].shipped
    with pytest.raises(StudyError, match="betavae beta=6 seed 2 comes from both card betavae-dsprites and card "
                                         "betavae-dsprites-run; give one of them"):
        study_table([zoo, _run_of("betavae-dsprites", 2, "betavae-dsprites-run")])
    with pytest.raises(StudyError, match="card vae-mnist .* is no run of the study's recipes"):
        study_table([get_card("vae-mnist")])
    # one card given twice (a path and a link to it) was "comes from both card betavae-dsprites and card
    # betavae-dsprites", as if two cards disagreed
    with pytest.raises(StudyError, match="^card betavae-dsprites is given twice; give each card once$"):
        study_table([zoo, zoo])


def test_a_run_folders_card_that_records_a_spread_gives_its_own_row_beside_the_other_seeds_runs():
    # after 'vaezoo seeds RUN... --write' on the folder of seed 2, the study of the folders was refused: "card
    # betavae-dsprites-run is given twice", the spread's seeds 0 and 1 clashing with their own run folders
    zoo = get_card("betavae-dsprites")
    spread = zoo.model_copy(update={"name": "betavae-dsprites-run"})
    table = study_table([spread, _run_of("betavae-dsprites", 0, "betavae-dsprites-run"),
                         _run_of("betavae-dsprites", 1, "betavae-dsprites-run")])
    cell = table.cells()[("betavae", 6.0)]
    assert [r.seed for r in cell] == [0, 1, 2] and not any(r.shipped for r in cell)
    assert all(r.metrics["mig_dlib"] == zoo.metrics["mig_dlib"].value for r in cell)
    assert [r.seed for r in study_table([spread]).rows] == [zoo.train.seed]


def _in_folder(card, folder: Path):
    """``card`` as read from its file in ``folder``."""
    from vaezoo.entries.entry import write_card

    folder.mkdir(parents=True)
    write_card(card, folder / f"{card.name}.toml")
    return get_card(folder / f"{card.name}.toml")


def test_two_runs_of_one_seed_are_named_by_their_folders_and_not_called_one_card_given_twice(tmp_path):
    # every run of a method is named METHOD-DATASET-run: two folders trained with one seed were "card
    # betavae-dsprites-run is given twice; give each card once"
    run = _run_of("betavae-dsprites", 3, "betavae-dsprites-run")
    one, two = (_in_folder(run, tmp_path / name) for name in ("a", "b"))
    with pytest.raises(StudyError, match=f"^betavae beta=6 seed 3 comes from both {one.path} and {two.path}, two "
                                         f"cards named betavae-dsprites-run; give one of them$"):
        study_table([one, two])
    with pytest.raises(StudyError, match="^card betavae-dsprites-run is given twice; give each card once$"):
        study_table([one, get_card(tmp_path / "a")])


def test_a_cell_whose_runs_made_other_steps_or_trained_in_another_precision_is_refused_naming_both():
    # a run stopped short (--max-steps) or trained in bf16 joined its cell, whose row on the page said the first
    # run's steps alone, and moved its median and spread; vaezoo seeds refuses both
    runs = [_run_of("betavae-dsprites", seed, "betavae-dsprites-run") for seed in (3, 4)]
    short = runs[1].model_copy(update={"train": runs[1].train.model_copy(update={"steps": 10})})
    with pytest.raises(StudyError, match=r"^betavae beta=6: seed 4 \(.*\) stopped at step 10, where seed 3 \(.*\) made "
                                         r"299,520: a run stopped short of its recipe's steps is not its result; "
                                         r"finish it with 'vaezoo train \.\.\. --resume', or leave it out$"):
        study_table([runs[0], short])
    bf16 = runs[1].model_copy(update={"train": runs[1].train.model_copy(update={"precision": "bf16-mixed"})})
    with pytest.raises(StudyError, match=r"^betavae beta=6: seed 3 \(.*\) trained in tf32-conv, seed 4 \(.*\) in "
                                         r"bf16-mixed: the runs of one recipe share one precision"):
        study_table([runs[0], bf16])
    assert len(study_table(runs).rows) == 2


def test_a_cell_whose_runs_trained_on_other_kinds_of_device_is_refused_and_other_thread_counts_join_it():
    from vaezoo.entries.schema import Machine

    def on(card, *machines: Machine):
        return card.model_copy(update={"train": card.train.model_copy(update={"machine": list(machines)})})

    cpu, gpu = (Machine(step=0, device=kind, torch="2.14.1", threads=1) for kind in ("cpu", "cuda"))
    runs = [_run_of("betavae-dsprites", seed, "betavae-dsprites-run") for seed in (3, 4, 5)]
    with pytest.raises(StudyError, match=r"^betavae beta=6: seed 3 \(.*\) trained on cpu, seed 4 \(.*\) on cuda: the "
                                         r"runs of one recipe train on one kind of device"):
        study_table([on(runs[0], cpu), on(runs[1], gpu)])
    with pytest.raises(StudyError, match=r"seed 3 \(.*\) trained on cpu, seed 4 \(.*\) on cpu then cuda"):
        study_table([on(runs[0], cpu), on(runs[1], cpu, gpu.model_copy(update={"step": 8}))])
    # the zoo's entry records no machine; another thread count rounds otherwise, as another seed draws otherwise
    table = study_table([get_card("betavae-dsprites"), on(runs[0], cpu),
                         on(runs[1], cpu.model_copy(update={"threads": 16})), runs[2]])
    assert [r.seed for r in table.cells()[("betavae", 6.0)]] == [0, 1, 2, 3, 4, 5]


def test_a_metric_measured_with_other_settings_on_two_cards_is_refused_naming_both():
    # a run measured with 'vaezoo eval --set mig_dlib.points=500 --write' joined the others' 10,000 points in its
    # cell, its median and the variance shares; vaezoo seeds refuses it
    runs = [_run_of("betavae-dsprites", seed, "betavae-dsprites-run") for seed in (3, 4)]
    mig = runs[1].metrics["mig_dlib"]
    fewer = runs[1].model_copy(update={"metrics": {**runs[1].metrics, "mig_dlib": mig.model_copy(
        update={"parameters": {**mig.parameters, "points": 500}})}})
    with pytest.raises(StudyError, match=r"^mig_dlib is measured with points = 500 on \S+ and 10000 on \S+: runs "
                                         r"measured otherwise are not compared; measure them alike with 'vaezoo eval "
                                         r"RUN --metrics mig_dlib --write --force' \(and --set mig_dlib.points=VALUE"):
        study_table([runs[0], fewer])
    assert len(study_table([get_card("betavae-dsprites"), get_card("betatcvae-dsprites"), runs[0]]).rows) == 7


def _row(method: str, value: float, seed: int | None, **metrics: float) -> StudyRow:
    return StudyRow(f"{method}-x", method, "model.beta", value, seed, seed == 0, 10, "fp32", metrics)


def test_variance_shares_give_the_known_answer_of_a_nested_table():
    # method effect +-3, value effect +-2 within each method, seed effect +-1 within each cell: shares 9:4:1.
    rows = [_row(m, v, s, score=a + b + c)
            for m, a in (("one", 3.0), ("two", -3.0)) for v, b in ((1.0, 2.0), (2.0, -2.0))
            for s, c in ((0, 1.0), (1, -1.0))]
    shares = variance_shares(StudyTable(tuple(rows), ("score",)), "score")
    assert (shares.method, shares.value, shares.seed) == pytest.approx((9 / 14, 4 / 14, 1 / 14))
    assert (shares.runs, shares.methods, shares.cells) == (8, 2, 4)
    flat = StudyTable(tuple(_row("one", 1.0, s, score=1.0) for s in (0, 1)), ("score",))
    assert variance_shares(flat, "score") is None


def test_a_released_model_is_placed_among_the_seeds_in_each_metrics_direction():
    rows = [_row("retrained", 1.0, s, up=float(s + 1), down=float(s + 1)) for s in (0, 1, 2)]
    rows.append(_row("released", 1.0, None, up=2.5, down=0.5))
    up, down = place_among_seeds(StudyTable(tuple(rows), ("up", "down")), "released", "retrained",
                                 {"up": True, "down": False})
    assert (up.beats, up.rank, up.position) == (2, 2, "inside")
    assert (down.beats, down.rank, down.position) == (3, 1, "below")


def test_the_page_says_so_when_the_released_model_is_not_in_the_table():
    # a study of runs alone said "JointVAE (Dupont's release) against the 0 seeds of jointvae-dsprites ... (rank 1
    # is the best of the 1)" over an empty table, and "better than the median seed on 0 of 0 metrics"
    table = StudyTable(tuple(_row("jointvae", 40.0, s, mig_dlib=0.1 * s) for s in (0, 1)), ("mig_dlib",))
    original = render_sections(table, [], "t.csv", {})["original"]
    assert original == ("Nothing to place: the table holds 0 rows of JointVAE (Dupont's release) and 2 runs of known "
                        "seed of jointvae-dsprites, and no metric that both record finite.")


def test_the_tables_steps_are_listed_in_numeric_order():
    # they were sorted as text: "steps 299520, 30"
    rows = [StudyRow("betavae-x", "betavae", "model.beta", v, s, False, steps, "fp32", {"mig_dlib": 0.1 * s + v})
            for v, steps in ((4.0, 299520), (6.0, 30)) for s in (0, 1)]
    assert "; steps 30, 299520; " in render_sections(StudyTable(tuple(rows), ("mig_dlib",)), [], "t.csv", {})["table"]


def test_the_page_names_the_zoos_entries_when_the_study_is_of_runs_alone():
    # span 2's study reads the beta-VAE runs in place of the entry: the page said the zoo had "(no entry yet)" of
    # beta-VAE and beta-TCVAE, and counted them among the new entries (6, not 4)
    runs = [_run_of("betavae-dsprites", seed, "betavae-dsprites-run") for seed in (3, 4)]
    sections = render_sections(study_table(runs), runs, "t.csv", {})
    assert "| beta-VAE | beta | 1,2,4,6,8,16 | 4 | the paper's (Higgins et al., 2017, on dSprites) | 6 |" in \
        sections["entries"]
    assert "| beta-TCVAE | beta | 1,2,4,6,8,10 | 6 | the paper's (Chen et al., 2018, on dSprites) | 6 |" in \
        sections["entries"]
    assert "| new zoo entries (one per new method) | 4: " in sections["weights"]


def test_the_median_seed_is_the_middle_run_and_the_lower_middle_of_an_even_count():
    assert median_seed([(0, 0.3), (1, 0.1), (2, 0.2)]) == 2
    assert median_seed([(0, 0.4), (1, 0.1), (2, 0.2), (3, 0.3)]) == 2


def test_the_shipped_seeds_median_is_taken_over_the_runs_that_record_the_metric_finite():
    # a NaN among the five seeds made seed 3, the lowest of the others, the median seed (2 is)
    values = (0.5, math.nan, 0.3, 0.1, 0.4)
    rows = [_row("betavae", 6.0, s, score=v, other=0.1 * s) for s, v in enumerate(values)]
    assert selection_check(StudyTable(tuple(rows), ("score", "other")), ["score", "other", "absent"]) == [
        ("betavae-x", 0, {"score": 2, "other": 2})]


def test_the_rule_takes_the_score_least_moved_by_the_seed_but_never_a_grid_dependent_one():
    grid, steady, noisy = GRID_DEPENDENT[0], "dci_disentanglement", "mig_dlib"
    rows = [_row(m, 1.0, s, **{grid: base, steady: base + 0.01 * s, noisy: base + 0.3 * s})
            for m, base in (("one", 0.0), ("two", 1.0)) for s in (0, 1)]
    assert rule_metric(StudyTable(tuple(rows), (grid, steady, noisy))) == steady


def test_the_page_says_no_rule_can_be_chosen_when_every_score_has_a_run_that_is_not_finite():
    # one run's NaN on the only score of the latent's match to the factors made 'vaezoo study --doc' fail: "no metric
    # is recorded finite on every run", though total_correlation was, and nothing was written
    rows = [_row("betavae", v, s, mig_dlib=math.nan if (v, s) == (4.0, 1) else 0.1 * s + v, total_correlation=v + s)
            for v in (4.0, 6.0) for s in (0, 1)]
    table = StudyTable(tuple(rows), ("mig_dlib", "total_correlation"))
    assert rule_metric(table) is None
    rule = render_sections(table, [], "t.csv", {})["rule"]
    assert "| total_correlation |" in rule and "| mig_dlib |" not in rule
    assert "**No rule's metric**: no score of the latent's match to the factors" in rule and "ship the" not in rule


def test_the_mig_figure_says_when_each_method_has_one_value():
    one = StudyTable(tuple(_row("betavae", 6.0, s, mig_dlib=0.1 * s) for s in (0, 1, 2)), ("mig_dlib",))
    svg = mig_figure(one, "mig_dlib")
    ET.fromstring(svg)
    assert "one value per method so far" in svg and "<polyline" not in svg
    assert all(f">{v:g}</text>" in svg for v in DSPRITES.method("betavae").grid)
    two = StudyTable(one.rows + tuple(_row("betavae", 2.0, s, mig_dlib=0.2) for s in (0, 1)), ("mig_dlib",))
    svg = mig_figure(two, "mig_dlib")
    assert "one value per method so far" not in svg and "<polyline" in svg


def test_a_distribution_names_its_cells_runs_not_drawn_as_non_finite_or_not_measured():
    # a cell whose only value was NaN or infinite had no row (the shipped gaussian_total_correlation figure left out
    # both joint models), and a run that did not measure the metric was counted "non-finite"
    rows = [_row("betavae", 4.0, s, score=0.1 * s) for s in (0, 1)] + [_row("betavae", 4.0, 2)]
    rows += [_row("betavae", 6.0, 0, score=math.inf), _row("betavae", 6.0, 1)]
    [plot] = distribution_plots(StudyTable(tuple(rows), ("score",)))
    assert [(s.label, len(s.values)) for s in plot.strips] == [
        ("beta-VAE beta=4 (1 not measured)", 2), ("beta-VAE beta=6 (1 non-finite, 1 not measured)", 0)]
    svg = ET.fromstring(plot.svg())
    texts = [e.text for e in svg.iter("{http://www.w3.org/2000/svg}text")]
    assert "beta-VAE beta=6 (1 non-finite, 1 not measured)" in texts
    assert len(list(svg.iter("{http://www.w3.org/2000/svg}circle"))) == 2


def test_the_mig_figure_names_the_runs_it_does_not_draw_and_draws_beside_a_value_of_zero():
    # beta=0 (a sweep's plain autoencoder) was a ValueError traceback (math domain error), and runs whose MIG was
    # NaN, or not measured, were left out without a word
    rows = [_row("betavae", 0.0, s, mig_dlib=0.1) for s in (0, 1)]
    rows += [_row("betavae", 4.0, 0, mig_dlib=0.2), _row("betavae", 4.0, 1, mig_dlib=math.nan), _row("betavae", 4.0, 2)]
    svg = ET.fromstring(mig_figure(StudyTable(tuple(rows), ("mig_dlib",)), "mig_dlib"))
    texts = [e.text for e in svg.iter("{http://www.w3.org/2000/svg}text")]
    assert "not drawn: beta-VAE beta 0 (2 off the log axis); beta-VAE beta 4 (1 non-finite, 1 not measured)" in texts
    assert [e.find("{http://www.w3.org/2000/svg}title").text for e in svg.iter("{http://www.w3.org/2000/svg}circle")] \
        == ["beta-VAE beta 4 seed 0: 0.2"]


def test_each_grid_command_parses_and_its_sweep_names_a_field_of_its_recipe(tmp_path, monkeypatch):
    from vaezoo.training.sweeps import members, parse_sweep

    monkeypatch.chdir(tmp_path)  # as a pip-installed user runs them: no checkout path (plugins/...) to the recipes

    parser = build_parser()
    spans = grid_spans()
    assert [len(span.commands) for span in spans] == [8, 4, 8]
    trained = 0
    for command in (c for span in spans for c in span.commands):
        if command.startswith("vaezoo eval "):  # the runs' folders, as the shell expands the pattern
            args = parser.parse_args(shlex.split(command.replace("--device cuda", "--device cpu"))[1:])
            assert len(args.card) == 1 and args.card[0].endswith("seed-*") and args.write
            continue
        assert " --device cuda " in command
        args = parser.parse_args(shlex.split(command.replace(" --device cuda ", " --device cpu "))[1:])
        assert args.no_eval
        card = get_card(args.card)
        trained += len(members(card, args.seeds, [parse_sweep(s) for s in args.sweep or []]))
    assert trained == 4 * 2 + 6 * 6 * len(SEEDS)


def test_the_page_and_the_shipped_files_are_what_the_command_writes_now(tmp_path):
    (tmp_path / "docs").mkdir()
    page = tmp_path / "docs" / "study.md"
    shutil.copy(PAGE, page)
    result = build_study(tmp_path / "docs" / "study", doc=page)
    assert page.read_text() == PAGE.read_text(), "run: vaezoo study docs/study --doc docs/study.md"
    written = sorted(p.name for p in (result.table, *result.figures))
    # the study's record and lock beside them are the command's own (git ignores them), not shipped files
    assert written == sorted(p.name for p in SHIPPED.parent.iterdir() if not p.name.startswith("."))
    for name in written:
        assert (SHIPPED.parent / name).read_bytes() == (tmp_path / "docs" / "study" / name).read_bytes(), name
        if name.endswith(".svg"):
            ET.fromstring((SHIPPED.parent / name).read_text())
        else:
            assert read_table(SHIPPED.parent / name).rows
    assert all(f"]({'study/' + name})" in PAGE.read_text() for name in written)


def test_fill_doc_refuses_a_page_without_a_sections_block():
    with pytest.raises(StudyError, match="the page has no block for rule; add <!-- study:NAME -->"):
        fill_doc("<!-- study:table -->\nold\n<!-- /study:table -->\n", {"table": "new", "rule": "x"})
    assert fill_doc("a\n<!-- study:table -->\nold\n<!-- /study:table -->\nb", {"table": "new"}) == \
        "a\n<!-- study:table -->\nnew\n<!-- /study:table -->\nb"


def test_the_command_writes_the_table_and_says_a_bad_source_in_one_line(tmp_path, capsys):
    assert main(["study", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == str(tmp_path / "out" / "dsprites.csv") and len(out) > 3
    assert (tmp_path / "out" / "dsprites.csv").read_bytes() == SHIPPED.read_bytes()
    assert main(["study", str(tmp_path / "out"), "vae-mnist"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: card vae-mnist (mnist) is no run of the study's recipes") and err.count("\n") == 1


def test_a_figure_vaezoo_did_not_write_is_refused_before_anything_is_written(tmp_path):
    from vaezoo.errors import VaezooError

    (tmp_path / "mig-mig_dlib.svg").write_text("mine")
    with pytest.raises(VaezooError, match="already holds mig-mig_dlib.svg, which vaezoo did not write"):
        build_study(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mig-mig_dlib.svg"]


def _files(folder: Path) -> dict[str, bytes]:
    """Every file in ``folder`` (hidden ones too) with its bytes; empty when there is no folder."""
    return {p.name: p.read_bytes() for p in folder.iterdir()} if folder.exists() else {}


def test_a_ctrl_c_that_code_swallowed_leaves_the_earlier_study_as_it_was(tmp_path, capsys, monkeypatch):
    """A Ctrl-C inside pydantic's validation became a ValidationError: every card was skipped, and the study went
    on to write an empty table and remove the earlier study's figures."""
    assert main(["study", str(tmp_path)]) == 0
    before = _files(tmp_path)

    def swallowing(cards, study=DSPRITES):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(5)
        except KeyboardInterrupt:
            pass
        return study_table([], study)

    monkeypatch.setattr("vaezoo.extras.study.study_table", swallowing)
    capsys.readouterr()
    assert main(["study", str(tmp_path)]) == 130
    assert capsys.readouterr().err == "error: interrupted\n"
    assert _files(tmp_path) == before


def test_a_ctrl_c_while_the_files_are_staged_leaves_no_temporary_file(tmp_path, capsys, monkeypatch):
    """A Ctrl-C once a figure's temporary file was made, before the study listed it for removal, left it there."""
    from vaezoo.extras import study

    assert main(["study", str(tmp_path)]) == 0
    before = _files(tmp_path)
    real, calls = study._stage, []

    def staged_then_interrupted(path, data, *args):
        tmp = real(path, data, *args)
        calls.append(path)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)
            sum(range(100))  # the handler runs here, before the file is returned
        return tmp

    monkeypatch.setattr(study, "_stage", staged_then_interrupted)
    capsys.readouterr()
    assert main(["study", str(tmp_path)]) == 130
    assert capsys.readouterr().err == "error: interrupted\n"
    assert _files(tmp_path) == before


def test_the_temporary_files_of_a_study_killed_while_writing_are_removed_by_the_next(tmp_path):
    """A study killed once its files were staged left each one's temporary file; the next never removed them, and
    every kill added more (17 after 20 kills)."""
    killed = subprocess.run([sys.executable, "-c", (
        "import os, signal\n"
        "from vaezoo.cli import main\n"
        "os.replace = lambda *args: os.kill(os.getpid(), signal.SIGKILL)  # at the first rename\n"
        f"main(['study', {str(tmp_path)!r}])\n")], capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # what the killed study left
    assert main(["study", str(tmp_path)]) == 0
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_a_table_vaezoo_did_not_write_is_refused_and_nothing_is_written(tmp_path, capsys):
    (tmp_path / "dsprites.csv").write_text("my,precious,data\n")
    before = _files(tmp_path)
    assert main(["study", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err == (f"error: {tmp_path} already holds dsprites.csv, which vaezoo did not write; give another folder, "
                   f"or move it away\n")
    assert _files(tmp_path) == before
    (tmp_path / "dsprites.csv").write_bytes(SHIPPED.read_bytes())  # a table vaezoo wrote is written again
    assert main(["study", str(tmp_path)]) == 0


def _page_without(block: str) -> str:
    return PAGE.read_text().replace(f"<!-- study:{block} -->\n", "", 1).replace(f"<!-- /study:{block} -->\n", "", 1)


@pytest.mark.parametrize("kind, problem", [
    ("missing", "cannot read {page}: No such file or directory; give a Markdown page with study blocks"),
    ("folder", "cannot read {page}: it is a folder; give a Markdown page with study blocks"),
    ("no blocks", "page {page} has no block for table, figures, variance, original, rule, entries, grid, weights; "
                  "add <!-- study:NAME --> and <!-- /study:NAME --> lines around where each goes"),
    ("a block missing", "page {page} has no block for rule; add <!-- study:NAME --> and <!-- /study:NAME --> lines "
                        "around where each goes"),
    ("read-only", "page {page} is read-only; make it writable (chmod u+w) to fill its study blocks, or give the path "
                  "of a copy"),
    ("folder takes no file", "cannot write {page}: Permission denied; make its folder writable, or give a copy of "
                             "the page in a folder you can write"),
])
def test_a_page_that_cannot_be_filled_is_refused_before_the_folder_is_touched(tmp_path, capsys, monkeypatch, kind,
                                                                              problem):
    out, fresh, page = tmp_path / "out", tmp_path / "fresh", tmp_path / "docs" / "study.md"
    build_study(out, ["betavae-dsprites"])  # an earlier study's files, which a refused one leaves as they are
    page.parent.mkdir()
    if kind == "folder":
        page.mkdir()
    elif kind != "missing":
        page.write_text({"no blocks": "# study\n", "a block missing": _page_without("rule")}.get(kind,
                                                                                               PAGE.read_text()))
    if kind == "read-only":
        page.chmod(0o444)
    if kind == "folder takes no file":
        import vaezoo.store.files as files

        def refused(*args, dir=None, **kwargs):
            if Path(dir) == page.parent:
                raise PermissionError(13, "Permission denied")
            return mkstemp(*args, dir=dir, **kwargs)

        mkstemp = files.tempfile.mkstemp
        monkeypatch.setattr(files.tempfile, "mkstemp", refused)
    before, listed = _files(out), sorted(p.name for p in page.parent.iterdir())
    text = page.read_bytes() if page.is_file() else None
    for folder in (out, fresh):
        assert main(["study", str(folder), "--doc", str(page)]) == 1
        assert capsys.readouterr().err == f"error: {problem.format(page=page)}\n"
    assert _files(out) == before and not fresh.exists()
    assert sorted(p.name for p in page.parent.iterdir()) == listed and (page.read_bytes() if text else None) == text


def _line(marker: str, nth: int = 1) -> int:
    """The number of the shipped page's line ``marker`` (its ``nth``), from 1."""
    lines = PAGE.read_text().split("\n")
    return [i for i, line in enumerate(lines, 1) if line == marker][nth - 1]


@pytest.mark.parametrize("edit, problem", [
    (lambda s: s.replace("<!-- /study:grid -->", "", 1),
     lambda: f"block 'grid' opened at line {_line('<!-- study:grid -->')} of page {{page}} is never closed; add "
             f"<!-- /study:grid --> before line {_line('<!-- study:weights -->')}"),
    (lambda s: s.replace("<!-- /study:weights -->", "", 1),
     lambda: f"block 'weights' opened at line {_line('<!-- study:weights -->')} of page {{page}} is never closed; "
             f"add <!-- /study:weights -->"),
    (lambda s: s.replace("<!-- study:table -->\n", "<!-- study:table -->\n<!-- study:table -->\n", 1),
     lambda: f"block 'table' opened at line {_line('<!-- study:table -->')} of page {{page}} is opened again at "
             f"line {_line('<!-- study:table -->') + 1}; remove one of the two <!-- study:table --> lines"),
    (lambda s: s.replace("<!-- study:rule -->\n", "", 1),
     lambda: f"line {_line('<!-- /study:rule -->') - 1} of page {{page}} closes block 'rule', which is not open; add "
             f"<!-- study:rule --> above it, or remove that line"),
    (lambda s: s + "<!-- study:table -->\n<!-- /study:table -->\n",
     lambda: f"block 'table' is in page {{page}} twice (lines {_line('<!-- study:table -->')} and "
             f"{len(PAGE.read_text().split(chr(10)))}); keep one of them"),
])
def test_a_malformed_block_is_named_with_its_line_and_the_page_is_left_as_it_was(tmp_path, capsys, edit, problem):
    page = tmp_path / "study.md"
    page.write_text(edit(PAGE.read_text()))
    text = page.read_bytes()
    assert main(["study", str(tmp_path / "out"), "--doc", str(page)]) == 1
    assert capsys.readouterr().err == f"error: {problem().format(page=page)}\n"
    assert page.read_bytes() == text and not (tmp_path / "out").exists()


def test_a_study_into_a_folder_another_writes_is_refused_naming_it(tmp_path, capsys):
    from vaezoo.store.locks import run_lock

    with run_lock(tmp_path / "out", "output path"):
        before = _files(tmp_path / "out")
        assert main(["study", str(tmp_path / "out")]) == 1
        err = capsys.readouterr().err
        assert err.startswith(f"error: output path {tmp_path / 'out'} is in use by process ") and err.count("\n") == 1
        assert _files(tmp_path / "out") == before


def test_the_figures_a_study_no_longer_draws_are_removed_but_not_a_users_file(tmp_path):
    first = {p.name for p in build_study(tmp_path).figures}
    second = {p.name for p in build_study(tmp_path, ["betavae-dsprites"]).figures}
    assert second < first
    assert sorted(p.name for p in tmp_path.glob("*.svg")) == sorted(second)
    build_study(tmp_path)
    for name in first - second:
        (tmp_path / name).write_text("<svg>mine</svg>")  # the user's own, in place of a figure vaezoo drew
    build_study(tmp_path, ["betavae-dsprites"])
    assert sorted(p.name for p in tmp_path.glob("*.svg")) == sorted(first)
    assert all((tmp_path / name).read_text() == "<svg>mine</svg>" for name in first - second)


@pytest.mark.parametrize("where", ["dangling", "dangling/sub"])
def test_an_output_path_through_a_link_to_nothing_is_named_as_such(tmp_path, capsys, where):
    # it was 'cannot write in output path dangling: File exists', mkdir's word for it
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    assert main(["study", str(tmp_path / where)]) == 1
    assert capsys.readouterr().err == (f"error: cannot write in output path {tmp_path / where}: "
                                       f"{tmp_path / 'dangling'} is a symbolic link to {tmp_path / 'gone'}, which does "
                                       f"not exist; choose another output path\n")
    assert not (tmp_path / "gone").exists()


@pytest.mark.parametrize("where", ["afile", "afile/sub"])
def test_an_output_path_that_is_no_folder_is_named_with_the_fix(tmp_path, capsys, where):
    (tmp_path / "afile").write_text("mine")
    assert main(["study", str(tmp_path / where)]) == 1
    assert capsys.readouterr().err == (f"error: cannot write in output path {tmp_path / where}: {tmp_path / 'afile'} "
                                       f"is a file, not a folder; choose another output path\n")
    assert (tmp_path / "afile").read_text() == "mine"


def test_the_sources_are_looked_up_in_one_read_of_the_zoo(tmp_path, monkeypatch):
    """Each source was looked up in the card folders twice (is it a zoo name? then its card): 'vaezoo study DIR
    runs/*/*/' of 200 run folders beside 5,000 cards read them 200 times, 13.6 of its 14.2 s."""
    from vaezoo.entries import catalog

    scans = []
    scan = catalog._scan
    monkeypatch.setattr(catalog, "_scan", lambda: scans.append(1) or scan())
    build_study(tmp_path)
    assert len(scans) == 1
