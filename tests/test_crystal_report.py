"""crucible.crystal.report on real crystals (AFLOW prototypes from the pinned pymatgen wheel):
one response file scored into per-item scores and a summary, the summary's groupings, the
generator table and figure; a response file that does not belong to the prompt set is refused
naming its file and line."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from crucible.core.errors import DataValidationError
from crucible.crystal import figures as crystal_figures
from crucible.crystal import items, parsing, report
from crucible.crystal.generation import answer_from_structure
from crucible.crystal.scoring import reference_structure

from helpers import REPO


@pytest.fixture(scope="module")
def item_files(aflow_file, tmp_path_factory):
    root = tmp_path_factory.mktemp("crystal_report")
    items.build_item_files(
        "aflow",
        "aflow-prototypes",
        [str(aflow_file)],
        REPO / "config" / "crystal_prompts.yaml",
        "composition-v1",
        root / "prompts.jsonl",
        root / "train.jsonl",
        max_sites=8,
        max_test_items=12,
    )
    prompts = [json.loads(line) for line in (root / "prompts.jsonl").read_text().splitlines()]
    return root, prompts


def _responses(prompts):
    """The reference itself (matches) for even items, prose for odd ones, no answer for the last."""
    rows = []
    for i, p in enumerate(prompts):
        if i == len(prompts) - 1:
            rows.append({"id": p["id"], "response": None, "error": "HTTP 500"})
        elif i % 2 == 0:
            ref = reference_structure(p["ground_truth"])
            rows.append({"id": p["id"], "response": answer_from_structure(ref, p["meta"]["elements"]), "error": None})
        else:
            rows.append({"id": p["id"], "response": "I am not sure.", "error": None})
    return rows


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_response_file_is_scored_item_by_item(item_files, tmp_path):
    root, prompts = item_files
    assert len(prompts) == 12
    responses = _write(tmp_path / "gen.jsonl", _responses(prompts))
    info = tmp_path / "gen.json"
    info.write_text(json.dumps({"seconds_per_item": 0.5}))
    summary = report.score_response_file(
        root / "prompts.jsonl", responses, "gen", tmp_path / "s.parquet", tmp_path / "s.json", info=info
    )
    df = pd.read_parquet(tmp_path / "s.parquet")
    assert list(df.columns) == report.SCORE_SCHEMA.names
    assert df["id"].tolist() == [p["id"] for p in prompts]
    assert df["matched"].tolist() == [i % 2 == 0 and i != 11 for i in range(12)]
    assert df["rms_dist"][df["matched"]].abs().max() < 1e-6 and df["rms_dist"][~df["matched"]].isna().all()
    assert df["reason"].tolist()[1::2] == [parsing.NO_JSON] * 5 + [parsing.NO_RESPONSE]
    assert df["nsites"].tolist() == [p["meta"]["nsites"] for p in prompts]
    assert json.loads((tmp_path / "s.json").read_text()) == summary
    assert (summary["matched"], summary["total"], summary["match_rate"]) == (6, 12, 50.0)
    assert summary["failures"][parsing.NO_JSON] == 5 and summary["failures"][parsing.NO_RESPONSE] == 1
    assert summary["generation"] == {"seconds_per_item": 0.5}
    # Groupings: every item counted once in each.
    for key in ("by_nsites", "by_crystal_system", "by_formula_in_train"):
        assert sum(g["total"] for g in summary[key].values()) == 12, key
        assert sum(g["matched"] for g in summary[key].values()) == 6, key
    for label, g in summary["by_nsites"].items():
        assert g["total"] == sum(report.nsite_bin(n) == label for n in df["nsites"])
    assert list(summary["by_nsites"]) == [
        b for b in (report.nsite_bin(lo) for lo, _ in report.NSITE_BINS) if b in summary["by_nsites"]
    ]
    # No sidecar: an empty generation record, same scores.
    again = report.score_response_file(
        root / "prompts.jsonl", responses, "gen", tmp_path / "t.parquet", tmp_path / "t.json", info=tmp_path / "x"
    )
    assert again["generation"] == {} and again["match_rate"] == 50.0


@pytest.mark.parametrize(
    "lines, match",
    [
        (['{"id": "nope", "response": "x"}'], r"bad.jsonl: line 1: id 'nope' is not an item of .*prompts.jsonl"),
        (["{first}", "", "{first}"], r"bad.jsonl: id '.*' appears on line 1 and again on line 3"),
        (["{first}", "", "not json"], r"bad.jsonl: line 3: not valid JSON"),
        (['{"response": "x"}'], r"bad.jsonl: line 1: field 'id' must be a non-empty string"),
    ],
)
def test_a_response_file_of_another_prompt_set_is_refused(item_files, tmp_path, lines, match):
    root, prompts = item_files
    first = json.dumps({"id": prompts[0]["id"], "response": "x"})
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(line.replace("{first}", first) + "\n" for line in lines))
    with pytest.raises(DataValidationError, match=match):
        report.score_response_file(root / "prompts.jsonl", bad, "g", tmp_path / "o.parquet", tmp_path / "o.json")
    assert not (tmp_path / "o.parquet").exists() and not (tmp_path / "o.json").exists()


def test_score_cli_refuses_two_answers_for_one_item_naming_the_file_and_both_lines(item_files, tmp_path, capsys):
    """One line matching the reference and a later one that does not: neither is kept; exit 2
    with the file and both lines on stderr, and no score file."""
    from crucible.cli import main

    root, prompts = item_files
    rows = _responses(prompts)
    rows.insert(3, {"id": prompts[0]["id"], "response": "I am not sure.", "error": None})
    responses = _write(tmp_path / "twice.jsonl", rows)
    out, summary = tmp_path / "s.parquet", tmp_path / "s.json"
    argv = ["crystal", "score", "--prompts", str(root / "prompts.jsonl"), "--responses", str(responses)]
    assert main([*argv, "--generator", "g", "--out", str(out), "--out-summary", str(summary)]) == 2
    err = capsys.readouterr().err
    assert f"{responses}: id {prompts[0]['id']!r} appears on line 1 and again on line 4" in err, err
    assert not out.exists() and not summary.exists()


def test_nsite_bins_cover_every_size():
    assert [report.nsite_bin(n) for n in (1, 2, 3, 8, 9, 12, 20, 21, 500)] == [
        "1-2",
        "1-2",
        "3-4",
        "7-8",
        "9-12",
        "9-12",
        "17-20",
        ">20",
        ">20",
    ]


def test_generator_table_and_figure_from_summaries(item_files, tmp_path):
    root, prompts = item_files
    paths = []
    for name, rows in (("self", _responses(prompts)), ("none", [{"id": p["id"], "response": "?"} for p in prompts])):
        resp = _write(tmp_path / f"{name}.jsonl", rows)
        report.score_response_file(
            root / "prompts.jsonl", resp, name, tmp_path / f"{name}.parquet", tmp_path / f"{name}.json"
        )
        paths.append(tmp_path / f"{name}.json")
    summaries = report.read_summaries(paths)
    df = report.write_table_files(
        summaries, "aflow-prototypes", tmp_path / "t.csv", tmp_path / "t.md", tmp_path / "t.tex"
    )
    assert df["generator"].tolist() == ["self", "none"]
    assert df["match_rate"].tolist() == [50.0, 0.0] and df["fail_no_json"].tolist() == [5, 12]
    assert (df["matched"] + df[[f"fail_{r}" for r in parsing.REASONS]].sum(axis=1) == df["total"]).all()
    assert pd.read_csv(tmp_path / "t.csv")["generator"].tolist() == ["self", "none"]
    assert "| self |" in (tmp_path / "t.md").read_text() and "match rate (%)" in (tmp_path / "t.md").read_text()
    crystal_figures.write_match_rate_figure(paths, "aflow-prototypes", tmp_path / "f.png", tmp_path / "f.pdf")
    assert (tmp_path / "f.png").stat().st_size > 10_000 and (tmp_path / "f.pdf").stat().st_size > 1_000


# --- issue 23: a table and a figure a paper can print ---------------------------------------


def _markdown_rows(path):
    """The Markdown table of ``path`` as {first cell: {header: cell}}, and the text above it."""
    text = path.read_text()
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    heads = [h.strip() for h in lines[0].strip("|").split(" | ")]
    rows = [[c.strip() for c in line.strip("|").split(" | ")] for line in lines[1:]]
    return {row[0]: dict(zip(heads, row)) for row in rows}, text.split("\n| ")[0]


@pytest.fixture(scope="module")
def scored(item_files, aflow_file, tmp_path_factory):
    """Two responders on the 12 real items: "self" answers with the reference for even items
    (6 matched), "none" never answers with JSON. Each scored through score_response_file with an
    audit summary: the real test split's size; "self" with a de-duplicated set of 4 items, "none"
    with an empty one (every test item also in train)."""
    from crucible.crystal import data

    root, prompts = item_files
    out = tmp_path_factory.mktemp("crystal_scored")
    _, test = data.load_dataset("aflow", [str(aflow_file)], max_sites=8)
    dedup = {"self": [p["id"] for p in prompts[:4]], "none": []}
    rows = {"self": _responses(prompts), "none": [{"id": p["id"], "response": "?"} for p in prompts]}
    summaries = {}
    for name in ("self", "none"):
        audit = out / f"{name}-audit.json"
        audit.write_text(json.dumps({"deduplicated_test_ids": dedup[name], "splits": {"test": {"items": len(test)}}}))
        info = out / f"{name}-info.json"
        info.write_text(json.dumps({"seconds_per_item": 0.5}))
        summaries[name] = report.score_response_file(
            root / "prompts.jsonl",
            _write(out / f"{name}.jsonl", rows[name]),
            name,
            out / f"{name}.parquet",
            out / f"{name}.json",
            info=info,
            audit=audit,
        )
    return prompts, [summaries["self"], summaries["none"]], len(test), out


def test_the_printed_table_gives_percentages_and_the_items_each_rate_is_over(scored, tmp_path):
    prompts, summaries, n_split, _ = scored
    seen = sum(bool(p["meta"]["formula_in_train"]) for p in prompts)
    seen_matched = sum(bool(p["meta"]["formula_in_train"]) for p in prompts[:11:2])
    paths = {e: tmp_path / f"t.{e}" for e in ("csv", "md", "tex")}
    report.write_table_files(summaries, "aflow-prototypes", paths["csv"], paths["md"], paths["tex"])
    rows, above = _markdown_rows(paths["md"])
    me, none = rows["self"], rows["none"]
    assert me["match rate (%) [cdvae]"] == "50.0" and none["match rate (%) [cdvae]"] == "0.0"
    assert me["test items"] == "12" and me["matched (items) [cdvae]"] == "6"
    # each subset's rate beside its number of items; a subset without items has no rate
    assert (me["seen formula: items"], me["unseen formula: items"]) == (str(seen), str(12 - seen))
    for subset, n, k in (("seen", seen, seen_matched), ("unseen", 12 - seen, 6 - seen_matched)):
        assert me[f"{subset} formula: match rate (%) [cdvae]"] == (f"{100 * k / n:.1f}" if n else "–")
    assert me["de-duplicated test: items"] == "4" and me["de-duplicated test: match rate (%) [cdvae]"] == "50.0"
    assert none["de-duplicated test: items"] == "0" and none["de-duplicated test: match rate (%) [cdvae]"] == "–"
    # the normalised RMS is said so; no timing column; the caption says how many items of which split
    assert "mean RMS (normalised) [cdvae]" in me and not any("s/item" in h or "second" in h for h in me)
    assert f"12 of the {n_split} items of the aflow-prototypes test split" in above
    assert "(V/n)^(1/3)" in above and "responses/{generator}.json" in above
    csv = pd.read_csv(paths["csv"])
    assert "seconds_per_item" not in csv.columns
    assert csv["total_unseen"].tolist() == [12 - seen, 12 - seen] and csv["total_dedup"].tolist() == [4, 0]
    assert csv["match_rate_dedup"].iloc[0] == 50.0 and math.isnan(csv["match_rate_dedup"].iloc[1])
    assert r"(\%)" in paths["tex"].read_text()


def test_two_runs_of_the_table_give_identical_bytes_though_their_timings_differ(scored, tmp_path):
    """The generation time stays in the summary (and its sidecar), not in the table."""
    _, summaries, _, out = scored
    assert json.loads((out / "self.json").read_text())["generation"]["seconds_per_item"] == 0.5
    slower = [{**s, "generation": {**s["generation"], "seconds_per_item": 7.25, "generate_s": 87.0}} for s in summaries]
    written = []
    for name, run in (("first", summaries), ("second", slower)):
        paths = [tmp_path / f"{name}.{e}" for e in ("csv", "md", "tex")]
        report.write_table_files(run, "aflow-prototypes", *paths)
        written.append([p.read_bytes() for p in paths])
    assert written[0] == written[1]


@pytest.mark.parametrize(
    "matched, total, low, high",
    # Newcombe, Statistics in Medicine 17 (1998) 857, Table I, method 3 (Wilson score)
    [(81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605), (0, 20, 0.0, 0.1611), (1, 29, 0.0061, 0.1718)],
)
def test_wilson_interval_on_textbook_values(matched, total, low, high):
    lo, hi = crystal_figures.wilson_interval(matched, total)
    assert (round(lo, 4), round(hi, 4)) == (low, high)


def _wilson_scipy(matched, total):
    from scipy.stats import binomtest

    ci = binomtest(matched, total).proportion_ci(confidence_level=0.95, method="wilson")
    return ci.low, ci.high


def test_the_figure_tells_a_bin_matched_by_none_from_one_not_evaluated(scored, tmp_path):
    """ "self", "none" on all 12 items, and "small" scored on the cells of at most 2 sites only:
    in every bin each responder has either a bar (height = its rate) with its Wilson interval,
    plus a "0" where it matched none, or (no items there) a hatched "n/a" slot and no bar."""
    import matplotlib.pyplot as plt

    _, summaries, _, out = scored
    per_item = pd.read_parquet(out / "self.parquet").assign(bin=lambda d: [report.nsite_bin(n) for n in d["nsites"]])
    small = per_item[per_item["nsites"] <= 2]
    assert 0 < len(small) < len(per_item)
    runs = [*summaries, report.summarize(small.drop(columns="bin"), "small")]
    frames = {"self": per_item, "none": per_item.assign(matched=False), "small": small}
    fig = crystal_figures.match_rate_by_nsites_figure(runs, "aflow-prototypes")
    ax = fig.axes[0]
    patches = {p.get_gid(): p for p in ax.patches if p.get_gid()}
    texts = {t.get_gid(): t for t in ax.texts if t.get_gid()}
    bins = [b for b in (report.nsite_bin(lo) for lo, _ in report.NSITE_BINS) if b in set(per_item["bin"])]
    assert len(bins) >= 2
    seen_zero = seen_missing = 0
    for name, frame in frames.items():
        segments = iter(next(c for c in ax.collections if c.get_gid() == f"wilson95|{name}").get_segments())
        for b in bins:
            here = frame[frame["bin"] == b]
            if len(here):
                k, n = int(here["matched"].sum()), len(here)
                bar = patches[f"rate|{name}|{b}"]
                assert bar.get_height() == pytest.approx(100 * k / n) and not bar.get_hatch()
                (x0, y0), (x1, y1) = next(segments)
                lo, hi = _wilson_scipy(k, n)
                assert (y0, y1) == (pytest.approx(100 * lo, abs=1e-9), pytest.approx(100 * hi, abs=1e-9))
                assert x0 == x1 == pytest.approx(bar.get_x() + bar.get_width() / 2)
                if k == 0:
                    seen_zero += 1
                    label = texts[f"zero|{name}|{b}"]
                    assert label.get_text() == "0" and label.get_position()[0] == pytest.approx(x0)
                assert f"not-evaluated|{name}|{b}" not in patches
            else:
                seen_missing += 1
                assert f"rate|{name}|{b}" not in patches and f"zero|{name}|{b}" not in texts
                slot = patches[f"not-evaluated|{name}|{b}"]
                assert slot.get_hatch() and texts[f"not-evaluated|{name}|{b}"].get_text() == "n/a"
        assert next(segments, None) is None  # one interval per evaluated bin, no more
    assert seen_zero >= len(bins) and seen_missing == len(bins) - 1  # "none" everywhere; "small" misses all but one bin
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks == [f"{b}\n(n={int((per_item['bin'] == b).sum())})" for b in bins]
    plt.close(fig)


def test_a_reply_cut_off_at_max_tokens_is_counted_apart_from_malformed_ones(item_files, tmp_path):
    """Issue 33: a 16-site answer cut at 320 tokens was scored "missing field atomic_sites"."""
    root, prompts = item_files
    rows = []
    for i, p in enumerate(prompts[:4]):
        full = answer_from_structure(reference_structure(p["ground_truth"]), p["meta"]["elements"])
        if i == 0:  # cut in the sites: unfinished JSON
            rows.append(
                {"id": p["id"], "response": full[: len(full) // 2], "finish_reason": "length", "completion_tokens": 64}
            )
        elif i == 1:  # cut, but the whole answer came before the limit: still scored as an answer
            rows.append({"id": p["id"], "response": full, "finish_reason": "length", "completion_tokens": 64})
        elif i == 2:  # malformed, not cut off
            rows.append({"id": p["id"], "response": "I am not sure.", "finish_reason": "stop"})
        else:  # a file without finish_reason (another generator's): as before
            rows.append({"id": p["id"], "response": full[: len(full) // 2]})
    responses = _write(tmp_path / "llm.jsonl", rows)
    sub = tmp_path / "prompts.jsonl"
    sub.write_text("".join(json.dumps(p) + "\n" for p in prompts[:4]))
    summary = report.score_response_file(sub, responses, "llm", tmp_path / "s.parquet", tmp_path / "s.json")
    df = pd.read_parquet(tmp_path / "s.parquet")
    assert df["reason"].tolist()[0] == parsing.CUT_OFF and df["matched"].tolist()[1]
    assert df["reason"].tolist()[2] == parsing.NO_JSON and df["reason"].tolist()[3] in parsing.FORMAT_FAILURES
    assert summary["failures"][parsing.CUT_OFF] == 1 and summary["failures"][parsing.NO_JSON] == 1
    table = report.generator_table([summary])
    assert table["fail_cut_off"].tolist() == [1]
    assert report.TABLE_HEADERS["fail_cut_off"].startswith("failed, cut off at the token limit")
    assert df["detail"].tolist()[0].startswith("cut off at max_tokens=64; ")


def test_the_figure_draws_the_chance_floor_of_each_size_bin(scored, item_files):
    """The chance responder's first samples, binned by the items' sites: a dashed line across
    each bin at its match rate (the CSP table's chance rows, by size), a second sample ignored."""
    import matplotlib.pyplot as plt

    from crucible.crystal.scoring import DEFAULT_CONVENTION

    _, summaries, _, out = scored
    _, prompts = item_files
    per_item = pd.read_parquet(out / "self.parquet")
    first = pd.DataFrame(
        {
            "id": per_item["id"],
            "rank": 0,
            "convention": DEFAULT_CONVENTION,
            "matched": ~per_item["matched"].astype(bool),
        }
    )
    second = first.assign(rank=1, matched=True)
    other = first.assign(convention="not-the-default", matched=True)
    floor = crystal_figures.chance_by_nsites(pd.concat([first, second, other]), prompts)
    nsites = {p["id"]: p["meta"]["nsites"] for p in prompts}
    expected = {}
    for ident, matched in zip(first["id"], first["matched"]):
        m, n = expected.get(report.nsite_bin(nsites[ident]), (0, 0))
        expected[report.nsite_bin(nsites[ident])] = (m + bool(matched), n + 1)
    assert floor == expected and sum(n for _, n in floor.values()) == len(per_item)
    fig = crystal_figures.match_rate_by_nsites_figure(summaries, "aflow-prototypes", floor)
    ax = fig.axes[0]
    lines = {c.get_gid(): c for c in ax.collections if (c.get_gid() or "").startswith("chance|")}
    assert set(lines) == {f"chance|{b}" for b in floor}
    for b, (m, n) in floor.items():
        ((_, y0), (_, y1)) = lines[f"chance|{b}"].get_segments()[0]
        assert y0 == y1 == pytest.approx(100 * m / n)
    assert "chance floor: a random cell, 1st sample" in [t.get_text() for t in ax.get_legend().get_texts()]
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert all(
        t.endswith(f"\n{100 * floor[t.split(chr(10))[0]][0] / floor[t.split(chr(10))[0]][1]:.0f} %") for t in ticks
    )
    assert "%: the chance floor" in ax.get_xlabel()
    plt.close(fig)
