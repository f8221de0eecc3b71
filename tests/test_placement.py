"""Address placement: CSV, validator, the four methods, diagnosis, time limits and the CLI."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pytest

from spyreopt.cli import place as place_cli
from spyreopt.solvers.placement import (
    Buffer,
    PlacementInputError,
    ValidationIssue,
    minimize_capacity,
    place,
    read_csv,
    validate,
    write_csv,
)
from spyreopt.solvers.placement.cpsat import cpsat_place
from spyreopt.solvers.placement.search import search_place
from spyreopt.solvers.placement.sweep import sweep
from spyreopt.solvers.placement.validate import KINDS

BENCH = Path(__file__).parent / "data" / "minimalloc"
INPUT12 = BENCH / "input.12.csv"
INPUT12_TEXT = "id,lower,upper,size\nb1,0,3,4\nb2,3,9,4\nb3,0,9,4\nb4,9,21,4\nb5,0,21,4\n"
METHODS = ["auto", "bestfit", "cpsat", "search"]


def example() -> list[Buffer]:
    return read_csv(INPUT12_TEXT)


def kinds(issues: list[ValidationIssue]) -> list[str]:
    return [i.kind for i in issues]


# --- CSV -------------------------------------------------------------------


def test_read_csv_file_matches_text():
    assert INPUT12.exists(), f"{INPUT12} is missing: the vendored test data (tests/data/SOURCE.md) must be in the clone"
    assert read_csv(INPUT12) == example()


def test_csv_round_trip_keeps_offsets_and_alignment(tmp_path):
    buffers = [Buffer("x", 0, 4, 8, alignment=4), Buffer("y", 2, 6, 3), Buffer("z", 5, 9, 2, offset=0)]
    offsets = {"x": 4, "y": 0, "z": 0}
    path = tmp_path / "out.csv"
    write_csv(buffers, offsets, path)
    assert path.read_text().splitlines()[0] == "id,lower,upper,size,alignment,offset"
    back = read_csv(path)
    assert back == [Buffer(b.id, b.lower, b.upper, b.size, b.alignment, offsets[b.id]) for b in buffers]


def test_csv_without_alignment_writes_minimalloc_columns(tmp_path):
    path = tmp_path / "out.csv"
    write_csv(example(), {"b1": 8, "b2": 8, "b3": 4, "b4": 4, "b5": 0}, path)
    assert path.read_text().splitlines()[:2] == ["id,lower,upper,size,offset", "b1,0,3,4,8"]


def test_end_column_is_inclusive():
    (b,) = read_csv("id,lower,end,size\nq,2,5,7\n")
    assert (b.lower, b.upper) == (2, 6)


def test_optional_columns_may_be_blank():
    a, b = read_csv("id,lower,upper,size,alignment,offset\na,0,2,4,,\nb,0,2,4,2,6\n")
    assert (a.alignment, a.offset) == (1, None)
    assert (b.alignment, b.offset) == (2, 6)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("id,lower,upper,size\na,0,3,x\n", "row 2, field 'size'"),
        ("id,lower,upper\na,0,3\n", "'size'"),
        ("id,lower,upper,size\na,0,3,4\na,1,2,4\n", "row 3, field 'id'"),
        ("id,lower,upper,size\na,0,3,4\nb,5,5,4\n", "row 3"),
        ("id,lower,upper,size\na,0,3,-4\n", "size"),
        ("id,lower,upper,size,offset\na,0,3,4,1.5\n", "row 2, field 'offset'"),
    ],
)
def test_bad_csv_names_row_and_field(text, expected):
    with pytest.raises(PlacementInputError, match=expected.replace("(", r"\(")):
        read_csv(text)


def test_missing_file_is_an_input_error(tmp_path):
    with pytest.raises(PlacementInputError, match="cannot read"):
        read_csv(tmp_path / "nope.csv")


# --- validator --------------------------------------------------------------


def test_valid_placement_has_no_issues():
    assert validate(example(), {"b1": 8, "b2": 8, "b3": 4, "b4": 4, "b5": 0}, 12, reported_height=12) == []


def test_validator_catches_each_kind():
    buffers = [
        Buffer("a", 0, 4, 4),
        Buffer("b", 2, 6, 4),
        Buffer("c", 0, 9, 2, alignment=4),
        Buffer("d", 6, 9, 4, offset=0),
        Buffer("e", 7, 9, 4),
    ]
    offsets = {"a": 0, "b": 2, "c": 6, "d": 4, "e": 10}
    issues = validate(buffers, offsets, capacity=12, reported_height=12)
    found = {(i.kind, i.ids) for i in issues}
    assert ("overlap", ("a", "b")) in found
    assert ("misaligned", ("c",)) in found
    assert ("moved_preplaced", ("d",)) in found
    assert ("out_of_range", ("e",)) in found
    assert ("wrong_height", ()) in found
    del offsets["e"]
    missing = validate(buffers, offsets, 12)
    assert ("missing_offset", ("e",)) in {(i.kind, i.ids) for i in missing}
    assert {kind for kind, _ in found} | set(kinds(missing)) == set(KINDS)


def test_touching_lifetimes_and_addresses_do_not_overlap():
    buffers = [Buffer("a", 0, 3, 4), Buffer("b", 3, 6, 4), Buffer("c", 0, 6, 4)]
    assert validate(buffers, {"a": 0, "b": 0, "c": 4}, 8) == []
    assert kinds(validate(buffers, {"a": 0, "b": 0, "c": 3}, 8)) == ["overlap", "overlap"]


def test_negative_offset_is_out_of_range():
    assert kinds(validate([Buffer("a", 0, 1, 1)], {"a": -1}, 4)) == ["out_of_range"]


# --- input.12 ---------------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_example_places_at_12(method):
    result = place(example(), 12, method=method)
    assert result.status == "placed", result.message
    assert validate(example(), result.offsets, 12, reported_height=12) == []
    assert result.stats["height"] == 12


def test_search_finds_the_published_answer():
    result = place(example(), 12, method="search")
    assert result.offsets == {"b1": 8, "b2": 8, "b3": 4, "b4": 4, "b5": 0}
    assert result.method == "search"


@pytest.mark.parametrize("method", METHODS)
def test_example_infeasible_at_11_with_diagnosis(method):
    result = place(example(), 11, method=method)
    assert result.status == "infeasible"
    assert result.offsets is None
    assert result.stats["over_by"] == 1 and result.stats["time"] in (0, 1, 2)
    assert "12 bytes" in result.message and "1 more than the capacity 11" in result.message


def test_search_itself_proves_11_infeasible_and_cpsat_agrees():
    buffers = example()
    assert search_place(buffers, 11, 5.0, sweep(buffers))[0] == "infeasible"
    assert cpsat_place(buffers, 11, 5.0, 0)[0] == "infeasible"


def test_fragmentation_infeasibility_is_proved_beyond_the_live_bytes_bound():
    # Three buffers of 4 live together under capacity 12, but alignment 8 leaves only two slots.
    buffers = [Buffer(f"a{k}", 0, 2, 4, alignment=8) for k in range(3)]
    result = place(buffers, 12, method="search")
    assert result.status == "infeasible"
    assert "proved" in result.message and "peak live bytes 12" in result.message
    assert place(buffers, 12, method="cpsat").status == "infeasible"
    assert place(buffers, 12, method="auto").status == "infeasible"


def test_bestfit_failure_is_not_called_infeasible():
    buffers = [Buffer(f"a{k}", 0, 2, 4, alignment=8) for k in range(3)]
    result = place(buffers, 12, method="bestfit")
    assert result.status == "timeout" and "heuristic" in result.message


# --- pre-placed, alignment, diagnosis ------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_preplaced_and_alignment_are_honoured(method):
    buffers = [
        Buffer("fixed", 0, 10, 4, offset=4),
        Buffer("p", 0, 5, 4, alignment=8),
        Buffer("q", 5, 10, 2, alignment=2),
        Buffer("r", 2, 8, 4),
    ]
    result = place(buffers, 12, method=method)
    assert result.status == "placed", result.message
    assert result.offsets["fixed"] == 4
    assert result.offsets["p"] % 8 == 0 and result.offsets["q"] % 2 == 0
    assert validate(buffers, result.offsets, 12) == []


def test_clashing_preplaced_buffers_are_diagnosed():
    buffers = [Buffer("a", 0, 5, 4, offset=0), Buffer("b", 3, 8, 4, offset=2), Buffer("c", 0, 8, 1)]
    result = place(buffers, 16)
    assert result.status == "infeasible" and result.method == "bound"
    assert "pre-placed" in result.message and "'a'" in result.message and "'b'" in result.message


def test_buffer_larger_than_capacity_is_diagnosed():
    result = place([Buffer("big", 0, 1, 20)], 16)
    assert result.status == "infeasible" and "'big' needs 20 bytes" in result.message


def test_bad_inputs_raise_typed_errors():
    with pytest.raises(PlacementInputError, match="duplicate"):
        place([Buffer("a", 0, 1, 1), Buffer("a", 1, 2, 1)], 4)
    with pytest.raises(PlacementInputError, match="method"):
        place(example(), 12, method="magic")
    with pytest.raises(PlacementInputError, match="capacity"):
        place(example(), -1)
    with pytest.raises(PlacementInputError, match="'z'.*size"):
        Buffer("z", 0, 1, 0)
    with pytest.raises(PlacementInputError, match="'z'.*lifetime"):
        Buffer("z", 3, 3, 1)
    with pytest.raises(PlacementInputError, match="'z'.*alignment"):
        Buffer("z", 0, 1, 1, alignment=0)


def test_numpy_integers_are_accepted_as_plain_ints():
    np = pytest.importorskip("numpy")
    b = Buffer("n", np.int64(0), np.int32(3), np.int64(4), offset=np.int64(0))
    assert type(b.size) is int and type(b.offset) is int
    assert place([b], np.int64(4)).offsets == {"n": 0}


def test_no_buffers_places_nothing():
    assert place([], 0).offsets == {}


# --- minimize_capacity --------------------------------------------------------


@pytest.mark.parametrize("method", METHODS)
def test_minimize_capacity_of_example_is_12(method):
    result = minimize_capacity(example(), method=method, time_limit=5)
    assert result.status == "placed"
    assert result.stats["capacity"] == 12 and result.stats["lower_bound"] == 12
    assert result.stats["proved_optimal"]
    assert validate(example(), result.offsets, 12, reported_height=12) == []


def test_minimize_capacity_proves_a_gap_above_the_lower_bound():
    buffers = [Buffer(f"a{k}", 0, 2, 4, alignment=8) for k in range(3)]
    result = minimize_capacity(buffers, method="search", time_limit=5)
    assert result.stats["lower_bound"] == 12
    assert result.stats["capacity"] == 20 and result.stats["proved_optimal"]


# --- time limits and determinism ----------------------------------------------


def challenging(name: str) -> list[Buffer]:
    path = BENCH / "challenging" / f"{name}.1048576.csv"
    assert path.exists(), f"{path} is missing: the vendored test data (tests/data/SOURCE.md) must be in the clone"
    return read_csv(path)


@pytest.mark.parametrize("method", ["search", "auto"])
def test_time_limit_is_honoured_on_a_hard_instance(method):
    buffers = challenging("D")  # at its live-bytes peak: far beyond a second's search
    start = time.monotonic()
    result = place(buffers, 986112, method=method, time_limit=0.6)
    elapsed = time.monotonic() - start
    assert result.status == "timeout" and result.offsets is None
    assert "time limit" in result.message
    assert elapsed < 0.6 + 1.0  # sweep, model building and interpreter noise


def test_auto_is_deterministic():
    buffers = [Buffer(f"b{k}", k % 5, k % 5 + 3 + k % 3, 1 + (7 * k) % 5) for k in range(20)]
    capacity = max(sweep(buffers).live_bytes(buffers))
    first = place(buffers, capacity, method="auto", seed=3)
    assert first.status == "placed"
    for _ in range(2):
        again = place(buffers, capacity, method="auto", seed=3)
        assert (again.offsets, again.method) == (first.offsets, first.method)


# --- CLI ----------------------------------------------------------------------


def cli(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    place_cli.add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_places_and_writes(tmp_path, capsys):
    src = tmp_path / "input.12.csv"
    src.write_text(INPUT12_TEXT)
    out = tmp_path / "out.csv"
    assert cli(["place", str(src), "--out", str(out)]) == 0  # capacity 12 from the file name
    placed = read_csv(out)
    assert validate(example(), {b.id: b.offset for b in placed}, 12) == []
    assert "capacity 12" in capsys.readouterr().out


def test_cli_reports_infeasible(tmp_path, capsys):
    src = tmp_path / "input.12.csv"
    src.write_text(INPUT12_TEXT)
    out = tmp_path / "out.csv"
    assert cli(["place", str(src), "--capacity", "11", "--method", "search", "--out", str(out)]) == 1
    assert "infeasible" in capsys.readouterr().err
    assert not out.exists()


def test_cli_needs_a_capacity(tmp_path, capsys):
    src = tmp_path / "plain.csv"
    src.write_text(INPUT12_TEXT)
    assert cli(["place", str(src), "--out", str(tmp_path / "o.csv")]) == 2
    assert "--capacity" in capsys.readouterr().err


def test_cli_reports_bad_input(tmp_path, capsys):
    src = tmp_path / "bad.12.csv"
    src.write_text("id,lower,upper,size\na,0,3,x\n")
    assert cli(["place", str(src), "--out", str(tmp_path / "o.csv")]) == 2
    assert "row 2, field 'size'" in capsys.readouterr().err
