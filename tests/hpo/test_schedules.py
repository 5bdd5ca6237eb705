"""Katib's round-based algorithms as schedules over stored trials: Hyperband with a budget
parameter, and Population Based Training."""

from __future__ import annotations

from loom.domain.experiments import TrialPhase
from loom.domain.katib import Algorithm, ExperimentSpec, Objective, Parameter, TrialParameter
from loom.hpo.study import Past, Proposal, Search

PARAMETERS = (
    Parameter("lr", "double", min=0.01, max=0.1, step=0.01),
    Parameter("epochs", "int", min=1, max=1),
)


def spec(name: str, settings: dict[str, str], kind: str = "maximize") -> ExperimentSpec:
    return ExperimentSpec(
        name="unit",
        parameters=PARAMETERS,
        objective=Objective(type=kind, metric="accuracy"),  # type: ignore[arg-type]
        algorithm=Algorithm(name, settings),
        trial_parameters=tuple(TrialParameter(p.name, p.name) for p in PARAMETERS),
        trial_spec={},
        parallel_trial_count=8,
        max_trial_count=20,
    )


def proposed(made: ExperimentSpec, past: list[Past]) -> Proposal | None:
    return Search(made, {}, past).propose()


def test_hyperband_runs_its_brackets_and_promotes_the_best_with_more_budget() -> None:
    """R = 4, η = 2: bracket 2 starts 4 configurations at budget 1, waits for them, then
    gives the best 2 budget 2 and the best of those budget 4; then brackets 1 and 0."""
    made = spec("hyperband", {"resource_name": "epochs", "r_l": "4", "eta": "2"})
    past: list[Past] = []
    budgets = []
    while True:
        found = proposed(made, past)
        if found is None:
            running = [t for t in past if t.phase == TrialPhase.RUNNING]
            assert running, "it waits only for running trials"
            past = [
                Past(t.number, TrialPhase.SUCCEEDED, t.sampled, t.attrs, objective=t.sampled["lr"])
                if t.phase == TrialPhase.RUNNING
                else t
                for t in past
            ]
            continue
        budgets.append(int(found.parameters["epochs"]))
        past.append(Past(len(past), TrialPhase.RUNNING, found.sampled, found.attrs))
        if Search(made, {}, past).exhausted():
            break
    assert budgets[:7] == [1, 1, 1, 1, 2, 2, 4]
    promoted = [t for t in past if "from" in t.attrs["hyperband"]]
    best_first = max((t for t in past[:4]), key=lambda t: t.sampled["lr"])
    assert promoted[0].attrs["hyperband"]["from"] == best_first.number
    assert promoted[0].sampled["lr"] == best_first.sampled["lr"]


def test_pbt_exploits_the_best_and_explores_the_rest_from_their_checkpoints() -> None:
    """After a generation of 5, the next comes from it: each child names its parent (whose
    checkpoints it starts from); one in the worst fifth takes a best member's parameters."""
    made = spec("pbt", {"n_population": "5", "truncation_threshold": "0.2", "random_state": "4"})
    past: list[Past] = []
    for number in range(5):
        found = proposed(made, past)
        assert found is not None and found.attrs["pbt"] == {"generation": 0}
        past.append(Past(number, TrialPhase.RUNNING, found.sampled, found.attrs))
    assert proposed(made, past) is None  # the generation has not reported yet
    past = [
        Past(t.number, TrialPhase.SUCCEEDED, t.sampled, t.attrs, objective=float(t.number))
        for t in past
    ]
    children = []
    for number in range(5, 10):
        found = proposed(made, past)
        assert found is not None and found.attrs["pbt"]["generation"] == 1
        children.append(found)
        past.append(Past(number, TrialPhase.RUNNING, found.sampled, found.attrs))
    parents = [c.attrs["pbt"]["parent"] for c in children]
    assert parents[0] == 4  # the best explores from itself
    exploit = children[4]  # the worst member (trial 0) copies the best (trial 4)
    assert exploit.attrs["pbt"]["parent"] == 4 and exploit.sampled == past[4].sampled
    for child in children:
        assert 0.01 <= child.sampled["lr"] <= 0.1
        assert round(child.sampled["lr"] * 100, 9).is_integer()  # on the parameter's steps


def test_proposals_of_one_pass_see_each_other() -> None:
    """Two PBT slots free at once, with four of a generation of five made: the first proposal
    completes the generation, the second starts the next from it (both were generation 0)."""
    made = spec("pbt", {"n_population": "5", "truncation_threshold": "0.2", "random_state": "4"})
    past = [
        Past(n, TrialPhase.SUCCEEDED, {"lr": 0.01 * (n + 1)}, {"pbt": {"generation": 0}}, 0.1 * n)
        for n in range(4)
    ]
    search = Search(made, {}, past)
    first, second = search.propose(), search.propose()
    assert first is not None and first.attrs["pbt"] == {"generation": 0}
    assert second is not None and second.attrs["pbt"]["generation"] == 1


def test_judging_a_running_trial_keeps_its_schedules_attributes() -> None:
    """With no pruner (PBT), a running trial's attributes (its generation and parent) come back
    as they were: the driver stores what it is given, and once stored `{}` for them."""
    made = spec("pbt", {"n_population": "2", "truncation_threshold": "0.5"})
    child = {"pbt": {"generation": 1, "parent": 0}}
    past = [
        Past(0, TrialPhase.SUCCEEDED, {"lr": 0.02}, {"pbt": {"generation": 0}}, 0.5),
        Past(1, TrialPhase.SUCCEEDED, {"lr": 0.03}, {"pbt": {"generation": 0}}, 0.6),
        Past(2, TrialPhase.RUNNING, {"lr": 0.02}, child, intermediate={1: 0.4}),
    ]
    stop, attrs = Search(made, {}, past).should_stop(2)
    assert not stop and attrs["pbt"] == child["pbt"]
