"""The search, rebuilt from stored trials as after every pass or a restart: every algorithm
proposes inside the space, a grid or a Sobol sequence never repeats a point across rebuilds,
and the pruners judge running trials on their reports."""

from __future__ import annotations

import math
from typing import Any

import pytest

from loom.domain.errors import ManifestError
from loom.domain.experiments import TrialPhase
from loom.domain.katib import (
    ALGORITHMS,
    Algorithm,
    ExperimentSpec,
    Objective,
    Parameter,
    TrialParameter,
)
from loom.hpo import algorithms
from loom.hpo.study import Past, Search

PARAMETERS = (
    Parameter("lr", "double", min=0.001, max=0.1, distribution="logUniform"),
    Parameter("width", "int", min=4, max=32, step=4),
    Parameter("optimizer", "categorical", values=("sgd", "adam")),
    Parameter("dropout", "double", min=0.0, max=0.5, step=0.1),
)
GRID = (
    Parameter("width", "int", min=4, max=12, step=4),
    Parameter("optimizer", "categorical", values=("sgd", "adam")),
)


def spec(
    algorithm: str,
    parameters: tuple[Parameter, ...] = PARAMETERS,
    settings: dict[str, str] | None = None,
    stopping: Algorithm | None = None,
    kind: str = "maximize",
) -> ExperimentSpec:
    return ExperimentSpec(
        name="unit",
        parameters=parameters,
        objective=Objective(type=kind, metric="accuracy"),  # type: ignore[arg-type]
        algorithm=Algorithm(algorithm, settings or {}),
        trial_parameters=tuple(TrialParameter(p.name, p.name) for p in parameters),
        trial_spec={},
        early_stopping=stopping,
        parallel_trial_count=2,
        max_trial_count=8,
    )


def run(made: ExperimentSpec, count: int, score: Any = None) -> tuple[list[Past], dict[str, Any]]:
    """Propose `count` trials one by one, each in a study rebuilt from the stored ones (as the
    driver does), completing each with `score(parameters)`."""
    past: list[Past] = []
    study: dict[str, Any] = {}
    for number in range(count):
        search = Search(made, study, past)
        proposal = search.propose()
        study = search.study_attrs
        value = score(proposal.sampled) if score else float(number)
        past.append(
            Past(number, TrialPhase.SUCCEEDED, proposal.sampled, proposal.attrs, objective=value)
        )
    return past, study


def check_inside(sampled: dict[str, Any]) -> None:
    assert 0.001 <= sampled["lr"] <= 0.1
    assert sampled["width"] in (4, 8, 12, 16, 20, 24, 28, 32)
    assert sampled["optimizer"] in ("sgd", "adam")
    assert 0.0 <= sampled["dropout"] <= 0.5
    assert math.isclose(round(sampled["dropout"] * 10), sampled["dropout"] * 10, abs_tol=1e-9)


@pytest.mark.parametrize("algorithm", [a for a in ALGORITHMS if a != "grid"])
def test_each_algorithm_proposes_inside_the_space(algorithm: str) -> None:
    settings = {"random_state": "1"}
    if algorithm == "bayesianoptimization":
        settings["n_initial_points"] = "2"
    if algorithm == "pbt":  # a generation of 5, then the next one from it
        settings.update(n_population="5", truncation_threshold="0.4")
    past, _ = run(spec(algorithm, settings=settings), 6, lambda s: -abs(math.log10(s["lr"]) + 2))
    for trial in past:
        check_inside(trial.sampled)


def test_a_grid_walks_every_point_once_across_rebuilds() -> None:
    made = spec("grid", GRID)
    past, _ = run(made, 6)
    points = {(t.sampled["width"], t.sampled["optimizer"]) for t in past}
    assert points == {(w, o) for w in (4, 8, 12) for o in ("sgd", "adam")}
    assert Search(made, {}, past).exhausted()


def test_sobol_goes_on_along_its_sequence_after_a_rebuild() -> None:
    made = spec("sobol", settings={"random_state": "5"})
    past, study = run(made, 4)
    assert study, "the sequence's position is kept in the study's attributes"
    lrs = [t.sampled["lr"] for t in past]
    assert len(set(lrs)) == 4


@pytest.mark.parametrize("algorithm", ["random", "tpe", "hyperband", "cmaes"])
def test_a_fixed_random_state_still_draws_new_points_at_each_decision(algorithm: str) -> None:
    """Each decision rebuilds the sampler: with `random_state` set it must not draw the first
    point again every time (it did, and a random search tried one point thirty times)."""
    past, _ = run(spec(algorithm, settings={"random_state": "1"}), 6)
    assert len({t.sampled["lr"] for t in past}) == 6


def test_tpe_is_reproducible_from_what_was_stored() -> None:
    """Two rebuilds from the same stored trials propose the same point: nothing lives only in
    the process."""
    made = spec("tpe", settings={"random_state": "9", "n_startup_trials": "2"})
    past, study = run(made, 4, lambda s: s["width"])
    one = Search(made, study, past).propose().sampled
    two = Search(made, study, past).propose().sampled
    assert one == two


def test_median_stop_judges_a_running_trial_on_its_reports() -> None:
    stopping = Algorithm("medianstop", {"min_trials_required": "2", "start_step": "2"})
    made = spec("random", GRID, stopping=stopping)
    good = [
        Past(
            n,
            TrialPhase.SUCCEEDED,
            {"width": 4, "optimizer": "sgd"},
            {},
            0.9,
            {1: 0.5, 2: 0.7, 3: 0.8, 4: 0.9},
        )
        for n in range(2)
    ]
    early = Past(2, TrialPhase.RUNNING, {"width": 8, "optimizer": "sgd"}, {}, None, {1: 0.1})
    worse = Past(
        3,
        TrialPhase.RUNNING,
        {"width": 8, "optimizer": "adam"},
        {},
        None,
        {1: 0.1, 2: 0.15, 3: 0.2},
    )
    better = Past(
        4,
        TrialPhase.RUNNING,
        {"width": 12, "optimizer": "adam"},
        {},
        None,
        {1: 0.6, 2: 0.75, 3: 0.85},
    )
    search = Search(made, {}, [*good, early, worse, better])
    assert search.should_stop(2)[0] is False  # before start_step
    assert search.should_stop(3)[0] is True
    assert search.should_stop(4)[0] is False


def test_asha_records_its_rungs_in_the_trial() -> None:
    stopping = Algorithm("asha", {"min_resource": "1", "reduction_factor": "2"})
    made = spec("random", GRID, stopping=stopping)
    done = [
        Past(n, TrialPhase.SUCCEEDED, {"width": 4, "optimizer": "sgd"}, {}, 0.9, {1: 0.8, 2: 0.9})
        for n in range(3)
    ]
    running = Past(3, TrialPhase.RUNNING, {"width": 8, "optimizer": "sgd"}, {}, None, {1: 0.1})
    stop, attrs = Search(made, {}, [*done, running]).should_stop(3)
    assert stop is True
    assert any("rung" in key for key in attrs)


@pytest.mark.parametrize(
    ("algorithm", "settings", "field"),
    [
        ("tpe", {"n_startup": "3"}, "spec.algorithm.algorithmSettings[n_startup]"),
        ("tpe", {"n_startup_trials": "many"}, "spec.algorithm.algorithmSettings[n_startup_trials]"),
        (
            "hyperband",
            {"resource_name": "epochs"},
            "spec.algorithm.algorithmSettings[resource_name]",
        ),
        (
            "bayesianoptimization",
            {"base_estimator": "RF"},
            "spec.algorithm.algorithmSettings[base_estimator]",
        ),
        ("cmaes", {"sigma": "-1"}, "spec.algorithm.algorithmSettings[sigma]"),
    ],
)
def test_bad_settings_are_refused_with_their_name(
    algorithm: str, settings: dict[str, str], field: str
) -> None:
    with pytest.raises(ManifestError) as refused:
        algorithms.check(spec(algorithm, settings=settings))
    assert refused.value.field == field


def test_what_optuna_cannot_sample_is_refused() -> None:
    """A normal parameter cannot be walked by a grid (it is searched by its quantiles); a grid
    of more than 100,000 points is refused."""
    normal = (Parameter("lr", "double", min=0.1, max=1.0, step=0.1, distribution="normal"),)
    with pytest.raises(ManifestError) as refused:
        algorithms.check(spec("grid", normal))
    assert refused.value.field == "spec.parameters[0].feasibleSpace.distribution"
    huge = (Parameter("a", "double", min=0, max=1000, step=0.001),) * 2
    with pytest.raises(ManifestError) as grid:
        algorithms.check(spec("grid", huge))
    assert "more than 100,000 points" in grid.value.message


def test_normal_parameters_are_drawn_around_the_middle_within_bounds() -> None:
    """normal and logNormal are Katib's hyperopt ones (mean in the middle, σ a sixth of the
    range): every value stays within min and max, on an int's whole numbers, and most are
    near the middle; min = max is a constant."""
    parameters = (
        Parameter("lr", "double", min=0.1, max=0.7, distribution="normal"),
        Parameter("batch", "int", min=32, max=64, distribution="logNormal"),
        Parameter("epochs", "int", min=2, max=2),
    )
    made = spec("random", parameters, settings={"random_state": "3"})
    past: list[Past] = []
    given = []
    for number in range(40):
        proposal = Search(made, {}, past).propose()
        assert proposal is not None
        given.append(proposal.parameters)
        past.append(Past(number, TrialPhase.SUCCEEDED, proposal.sampled, proposal.attrs, 1.0))
    lrs = [float(p["lr"]) for p in given]
    assert all(0.1 <= v <= 0.7 for v in lrs)
    assert sum(0.3 <= v <= 0.5 for v in lrs) > len(lrs) / 2  # within one σ: about 68%
    assert all(p["batch"].isdigit() and 32 <= int(p["batch"]) <= 64 for p in given)
    assert {p["epochs"] for p in given} == {"2"}
