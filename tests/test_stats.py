"""Paired statistics against independent references: scipy, brute force, hand-worked examples,
and seeded simulations of the test's size and power."""

import itertools
import json

import numpy as np
import pytest
from avstack_cli.app import app
from typer.testing import CliRunner

from avstack.analysis.compare import ItemSetMismatch, ItemTable, compare_runs
from avstack.analysis.stats import holm, mde, paired_bootstrap_ci, shapley, shapley_per_item, sign_flip_p


def _paired_fixture(n=150, seed=7):
    rng = np.random.default_rng(seed)
    base = (rng.random(n) < 0.55).astype(float)
    run = np.where(rng.random(n) < 0.25, 1 - base, base)
    return run, base


def test_paired_bootstrap_ci_agrees_with_scipy():
    scipy_stats = pytest.importorskip("scipy.stats")
    run, base = _paired_fixture()
    ours = paired_bootstrap_ci(run - base, n_resamples=10_000, seed=0)
    ref = scipy_stats.bootstrap(
        (run, base),
        lambda x, y, axis: np.mean(x - y, axis=axis),
        paired=True,
        vectorized=True,
        n_resamples=10_000,
        method="percentile",
        confidence_level=0.95,
        random_state=np.random.default_rng(123),
    ).confidence_interval
    # two Monte Carlo estimates of the same percentiles: they agree to Monte Carlo error
    assert ours[0] == pytest.approx(ref.low, abs=0.01) and ours[1] == pytest.approx(ref.high, abs=0.01)
    assert ours[0] < np.mean(run - base) < ours[1]


def test_cluster_bootstrap_against_a_hand_worked_case():
    # cluster A: diffs [1, 1]; cluster B: [0, 0, 0, 0]. Drawing 2 clusters: AA (1/4) -> 1,
    # AB or BA (1/2) -> 2/6, BB (1/4) -> 0: the 2.5% and 97.5% points are 0 and 1.
    diffs = [1, 1, 0, 0, 0, 0]
    lo, hi = paired_bootstrap_ci(diffs, clusters=["A", "A", "B", "B", "B", "B"], n_resamples=4000)
    assert (lo, hi) == (0.0, 1.0)
    lo2, hi2 = paired_bootstrap_ci(diffs, n_resamples=4000)  # items alone: a narrower interval
    assert 0 < hi2 - lo2 < 1


def _brute_force_p(diffs):
    """Every sign pattern of every difference (zeros included), mean statistic, two-sided."""
    d = np.asarray(diffs, dtype=float)
    observed = abs(d.mean())
    hits = total = 0
    for signs in itertools.product((1, -1), repeat=len(d)):
        total += 1
        hits += abs(np.mean(np.array(signs) * d)) >= observed - 1e-12
    return hits / total


@pytest.mark.parametrize(
    "diffs",
    [
        [1, 1, 1, 0, -1, 1, 0, 1, 1, 0],
        [0.5, -0.25, 1, 0.75, 0.5, 0, 0.25, 1, -1, 0.5, 0.25, 0.75],
        [1, 1, 1, 1, 1, 1],
        [0, 0, 0],
    ],
)
def test_exact_sign_flip_matches_brute_force_enumeration(diffs):
    assert sign_flip_p(diffs) == pytest.approx(_brute_force_p(diffs))


def test_random_sign_flip_is_close_to_exact():
    rng = np.random.default_rng(3)
    d = np.round(rng.normal(0.3, 1, 16), 2)
    exact = sign_flip_p(d)  # 16 non-zero: exact
    approx = sign_flip_p(d, exact_max=10, n_flips=20_000, seed=1)
    assert approx == pytest.approx(exact, abs=0.01)


def test_holm_against_a_hand_worked_example():
    # sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 = 0.02, 0.03, 0.06, 0.04 -> monotone: 0.02, 0.03, 0.06, 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])


def test_shapley_against_a_hand_worked_three_cue_example():
    v = {
        frozenset(): 0,
        frozenset("A"): 10,
        frozenset("B"): 20,
        frozenset("C"): 30,
        frozenset("AB"): 40,
        frozenset("AC"): 50,
        frozenset("BC"): 50,
        frozenset("ABC"): 90,
    }
    # by hand (weights 1/3, 1/6, 1/6, 1/3): A = 10/3 + 20/6 + 20/6 + 40/3 = 70/3; B = 85/3; C = 115/3
    phi = shapley(["A", "B", "C"], v)
    assert phi == pytest.approx({"A": 70 / 3, "B": 85 / 3, "C": 115 / 3})
    assert sum(phi.values()) == pytest.approx(90)  # efficiency
    per_item = shapley_per_item(["A", "B", "C"], {k: np.array([x, 2 * x]) for k, x in v.items()})
    assert per_item["A"] == pytest.approx([70 / 3, 140 / 3])


def test_mde_against_the_normal_formula():
    d = np.array([1, 0, 0, -1, 1, 1, 0, 0, 1, 0] * 10, dtype=float)
    assert mde(d) == pytest.approx((1.959964 + 0.841621) * d.std(ddof=1) / 10, rel=1e-5)


def _simulate(effect: float, n_items: int, n_sets: int, seed: int) -> float:
    """Share of seeded paired datasets where the sign-flip test rejects at alpha 0.05."""
    rng = np.random.default_rng(seed)
    rejected = 0
    for k in range(n_sets):
        base = (rng.random(n_items) < 0.5).astype(float)
        run = np.where(rng.random(n_items) < 0.15, 1 - base, base)  # symmetric noise: no effect
        run = np.where((run == 0) & (rng.random(n_items) < 2 * effect), 1.0, run)  # +effect on average
        rejected += sign_flip_p(run - base, n_flips=2000, seed=k) < 0.05
    return rejected / n_sets


def test_no_effect_rejects_at_about_alpha():
    assert 0.03 <= _simulate(0.0, 300, 400, seed=11) <= 0.07


def test_a_ten_point_effect_on_300_items_is_found():
    assert _simulate(0.10, 300, 400, seed=12) > 0.80


def test_deltas_over_different_items_are_refused_with_counts():
    a = ItemTable("a", {"x": {"m": 1}, "y": {"m": 0}})
    b = ItemTable("b", {"x": {"m": 1}})
    with pytest.raises(ItemSetMismatch, match=r"'b' has 1, the baseline 'a' has 2 \(1 in common\)"):
        compare_runs([a, b], ["m"])


def test_per_item_and_delta_files_of_a_report(prepared, tmp_path):
    out = tmp_path / "abl"
    res = CliRunner().invoke(
        app, ["ablate", str(prepared), "--model", "deixis", "--drop", "word_ts", "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    per_item = (out / "full" / "per_item.csv").read_text().splitlines()
    assert per_item[0] == "item_id,acc_cls,acc_s,acc_t,acc_eco,acc_seq,task_template,level,scene,lang"
    assert len(per_item) == 8
    delta = (out / "delta.csv").read_text().splitlines()
    assert delta[0] == "run,baseline,group,metric,value,baseline_value,delta,ci_low,ci_high,p_value,p_holm,mde,n"
    overall = next(dict(zip(delta[0].split(","), x.split(","))) for x in delta if ",overall,acc_t," in x)
    score = json.loads((out / "full-no_word_ts" / "score.json").read_text())
    base = json.loads((out / "full" / "score.json").read_text())
    want = 100 * (score["overall"]["acc_t"] - base["overall"]["acc_t"])
    assert float(overall["delta"]) == pytest.approx(want, abs=1e-4)
    assert float(overall["ci_low"]) <= want <= float(overall["ci_high"]) and overall["n"] == "7"
    text = (out / "report.md").read_text()
    assert "p=" in text and "[" in text and (out / "delta.png").stat().st_size > 1000


def test_ablate_subsets_prints_a_shapley_table(prepared, tmp_path):
    out = tmp_path / "sub"
    args = ["ablate", str(prepared), "--model", "deixis", "--subsets", "--out", str(out)]
    res = CliRunner().invoke(app, [*args, "--drop", "frame_ts", "--drop", "word_ts", "--drop", "asr"])
    assert res.exit_code == 0, res.output
    assert "What each cue is worth" in res.output and "| frame_ts x word_ts |" in res.output
    assert "`frame_ts + word_ts` = `full-no_word_ts-no_asr`" in res.output  # impossible subset, said
    rows = [x.split(",") for x in (out / "shapley.csv").read_text().splitlines()[1:]]
    acc_t = {r[0]: float(r[2]) for r in rows if r[1] == "acc_t"}
    # efficiency: the cues' Shapley values add up to v(all) - v(none)
    full = json.loads((out / "full" / "score.json").read_text())["overall"]["acc_t"]
    none = json.loads((out / "full-no_frame_ts-no_word_ts-no_asr" / "score.json").read_text())["overall"]["acc_t"]
    assert acc_t["frame_ts"] + acc_t["word_ts"] + acc_t["asr"] == pytest.approx(100 * (full - none), abs=1e-3)
    before = {p: p.read_bytes() for p in out.glob("*/predictions.jsonl")}
    res = CliRunner().invoke(app, [*args, "--drop", "frame_ts", "--drop", "word_ts", "--drop", "asr"])
    assert res.exit_code == 0 and len(before) == 6  # 8 subsets, 6 distinct stacks
    # reused: nothing asked again (a new answer would carry a new latency and cache flag)
    assert {p: p.read_bytes() for p in out.glob("*/predictions.jsonl")} == before


def test_egogap_per_item_and_paired_deltas(tmp_path):
    from test_egogap import cli_runs

    runs = cli_runs(tmp_path)
    rows = (runs[1] / "per_item.csv").read_text().splitlines()
    assert rows[0] == "item_id,correct,motor_intrusion,off_vantage,format,kind" and len(rows) == 9
    res = CliRunner().invoke(app, ["report", *map(str, runs), "--out", str(tmp_path / "rep")])
    assert res.exit_code == 0, res.output
    delta = [x.split(",") for x in (tmp_path / "rep" / "delta.csv").read_text().splitlines()]
    head = delta[0]
    row = dict(zip(head, next(r for r in delta if r[2] == "overall" and r[3] == "correct")))
    chance = json.loads((runs[1] / "score.json").read_text())["groups"]["overall"]["accuracy"]
    assert float(row["delta"]) == pytest.approx(100 * (chance - 1.0), abs=1e-4)
    assert "Deltas vs `oracle default-image`" in (tmp_path / "rep" / "report.md").read_text()


# --- sequential ablation: anytime-valid confidence sequences (avstack.analysis.sequential) ---


def _prpl_eb_by_the_paper(x: list[float], alpha: float) -> list[tuple[float, float]]:
    """Waudby-Smith & Ramdas (2024) eq. 15 written out term by term on [0, 1] data, no running
    intersection: an independent check of the vectorized implementation."""
    import math

    out = []
    for t in range(1, len(x) + 1):
        mu = [(0.5 + sum(x[:i])) / (i + 1) for i in range(0, t + 1)]  # mu[i] = mu-hat_i
        sig2 = [(0.25 + sum((x[j] - mu[j + 1]) ** 2 for j in range(i))) / (i + 1) for i in range(0, t + 1)]
        bet = 2 * math.log(2 / alpha)
        lam = [min(math.sqrt(bet / (sig2[i - 1] * i * math.log(1 + i))), 0.5) for i in range(1, t + 1)]
        v = [4 * (x[i - 1] - mu[i - 1]) ** 2 for i in range(1, t + 1)]
        psi = [(-math.log(1 - lm) - lm) / 4 for lm in lam]
        center = sum(lm * xi for lm, xi in zip(lam, x)) / sum(lam)
        radius = (math.log(2 / alpha) + sum(vi * p for vi, p in zip(v, psi))) / sum(lam)
        out.append((center - radius, center + radius))
    return out


def test_the_confidence_sequence_is_the_papers():
    from avstack.analysis.sequential import bounds

    rng = np.random.default_rng(3)
    d = rng.choice([-1.0, 0.0, 1.0], size=60, p=[0.15, 0.55, 0.3])
    low, high = bounds(d, 0.05)
    ref = _prpl_eb_by_the_paper(list((d + 1) / 2), 0.05)
    lo_run = np.maximum.accumulate([max(0.0, a) for a, _ in ref])
    hi_run = np.minimum.accumulate([min(1.0, b) for _, b in ref])
    np.testing.assert_allclose(low[0], 2 * lo_run - 1, atol=1e-12)
    np.testing.assert_allclose(high[0], 2 * hi_run - 1, atol=1e-12)


def test_looking_after_every_clip_keeps_the_error_under_alpha():
    """Simulation: 2,000 sequences of 300 paired clips with a true mean difference of 0.1; the
    interval must miss the mean at ANY clip count in at most alpha of them (binomial slack)."""
    from avstack.analysis.sequential import bounds

    rng = np.random.default_rng(11)
    d = rng.choice([-1.0, 0.0, 1.0], size=(2000, 300), p=[0.15, 0.6, 0.25])
    low, high = bounds(d, 0.05)
    ever_missed = ((low > 0.1) | (high < 0.1)).any(axis=1).mean()
    assert ever_missed <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / 2000)
    # and it narrows as clips come in (about as 1/sqrt(n), up to a log factor)
    width = (high - low).mean(axis=0)
    assert width[299] < width[74] < width[19] and width[299] < 0.3


def test_decide_stops_early_on_a_clear_effect_and_runs_out_on_none():
    from avstack.analysis.sequential import decide

    rng = np.random.default_rng(5)
    strong = [rng.choice([-1.0, 0.0, 1.0], size=811, p=[0.03, 0.75, 0.22]) for _ in range(2)]
    d = decide(strong, round_size=50)
    assert d.decided and d.why == "every interval excludes zero" and d.stopped_at < 811 / 2
    assert d.stopped_at % 50 == 0 and all(i.low > 0 for i in d.intervals)
    none = [rng.choice([-1.0, 0.0, 1.0], size=811, p=[0.1, 0.8, 0.1]) for _ in range(2)]
    d = decide(none, round_size=50)
    assert not d.decided and d.stopped_at == 811 and d.why == "clips ran out"
    d = decide(none, round_size=50, precision=0.3)
    assert d.decided and d.why == "precision reached" and all(i.width < 0.3 for i in d.intervals)


def test_growing_rounds_look_early_and_often_on_a_small_set():
    from avstack.analysis.sequential import look_points

    assert look_points(40) == [10, 15, 23, 35, 40]  # by hand: 10, ceil(15), ceil(22.5), ceil(34.5), the end
    assert look_points(7) == [7] and look_points(0) == []
    assert look_points(120, 50) == [50, 100, 120]  # an explicit --round keeps its fixed rounds
    assert len(look_points(10_000)) == 18


def test_a_40_question_ablation_with_a_clear_difference_stops_before_asking_everything():
    from avstack.analysis.sequential import ask_until_decided

    ids = [f"q{i}" for i in range(40)]
    seen = []

    def ask(asked):  # stack a right on every question, stack b wrong: paired differences of 1
        seen.append(len(asked))
        return [[1.0] * len(asked)]

    asked, d = ask_until_decided(ids, None, ask)
    assert d.decided and len(asked) < 40 and 2 * len(asked) < 80, (seen, d)
    asked50, d50 = ask_until_decided(ids, 50, ask)  # the old fixed round of 50 asked all 40
    assert len(asked50) == 40


def test_growing_looks_keep_the_error_under_alpha_by_simulation():
    """Under no difference, stopping at any of the growing looks decides wrongly at most alpha of
    the time (the confidence sequence is valid at every n; 400 simulated ablations of 300)."""
    from avstack.analysis.sequential import decide

    rng = np.random.default_rng(11)
    wrong = sum(decide([rng.choice([-1.0, 0.0, 1.0], size=300, p=[0.2, 0.6, 0.2])]).decided for _ in range(400))
    assert wrong / 400 <= 0.05, wrong
