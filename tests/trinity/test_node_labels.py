"""The node placement labels' one check and the swarm constraints they make, as
tables (``trinity/node_labels.py``)."""

from __future__ import annotations

import pytest

from trinity.node_labels import MAX_LABELS, label_problem, placement_problem, swarm_constraints


@pytest.mark.parametrize(
    ("name", "value", "refused"),
    [
        ("trinity.pool", "gpu-less", None),
        ("a", "B", None),
        ("0", "9", None),
        ("a" * 63, "Z" * 63, None),
        ("a" * 64, "x", "Label name"),
        ("pool", "x" * 64, "the value is 1 to 63"),
        ("a.b_c-d", "A.b_C-9", None),
        ("a..b", "x..y", None),  # inner punctuation, repeated, cannot form an operator
        ("", "x", "Label name ''"),
        ("pool", "", "the value is 1 to 63"),
        ("Pool", "x", "Label name 'Pool'"),
        ("_pool", "x", "Label name"),
        ("pool_", "x", "Label name"),
        ("pool", "_x", "the value"),
        ("pool", "x_", "the value"),
        ("pool", "a=b", "the value"),
        ("pool", "a!=b", "the value"),
        ("pool", "a,b", "the value"),
        ("pool", "a b", "the value"),
        ("pool", "a\tb", "the value"),
        ("pool", "ab\n", "the value"),
        ("pool\n", "ab", "Label name 'pool\\n'"),
        ("pool", "a'b", "the value"),
        ("pool", 'a"b', "the value"),
        ("pool", "a/b", "the value"),
        ("pool", "ab\u0660", "the value"),  # an Arabic-Indic digit is no ASCII digit
        ("pool", 7, "not a number"),
        ("pool", 7.5, "not a number"),
        ("pool", False, "not a boolean"),
        ("pool", None, "not null"),
        ("pool", ["a"], "not a list"),
        ("pool", {"a": "b"}, "not an object"),
        (7, "x", "Every label name is text."),
    ],
)
def test_each_label_is_checked_by_its_shape(
    name: object, value: object, refused: str | None
) -> None:
    problem = label_problem(name, value)
    if refused is None:
        assert problem is None
    else:
        assert problem is not None
        assert refused in problem


def test_a_placement_is_an_object_of_at_most_eight_labels() -> None:
    eight = {f"l{i}": "v" for i in range(MAX_LABELS)}
    assert MAX_LABELS == 8
    assert placement_problem({}) is None
    assert placement_problem(eight) is None
    assert placement_problem({**eight, "l8": "v"}) == "At most 8 labels (9 given)."
    for not_an_object in ("a=b", ["a", "b"], None, 1):
        assert (placement_problem(not_an_object) or "").startswith("Placement is an object")


def test_the_first_bad_label_is_named_cut_and_escaped_and_no_value_is_repeated() -> None:
    assert placement_problem({"ok": "v", "Bad": "v", "worse!": "v"}) == (
        "Label name 'Bad': 1 to 63 lower-case letters, digits, '.', '-' or '_', starting "
        "and ending with a letter or digit."
    )
    long_name = placement_problem({"k" * 1000: "v"}) or ""
    assert f"'{'k' * 40}'…" in long_name
    assert "k" * 41 not in long_name
    assert "\\u202e" in (placement_problem({"a\u202eb": "v"}) or "")
    assert "hidden" not in (placement_problem({"pool": "hidden value"}) or "")


def test_the_swarm_constraints_are_one_equality_per_label_sorted_by_name() -> None:
    placement = {"zone": "eu-1", "trinity.pool": "gpu-less"}
    assert swarm_constraints(placement) == [
        "node.labels.trinity.pool==gpu-less",
        "node.labels.zone==eu-1",
    ]
    assert swarm_constraints({}) == []


def test_no_invalid_placement_becomes_a_constraint() -> None:
    with pytest.raises(ValueError, match="Label 'pool': the value"):
        swarm_constraints({"pool": "gpu,node.role==manager"})
