"""--engine auto's documented rule and the range sizing (pure functions: no Spark, no files)."""

from __future__ import annotations

from mqctl.pipeline.engine import (
    LOCAL_MAX_BYTES,
    MASTER_ENV,
    MAX_TASK_BYTES,
    choose_engine,
    range_size_for,
    task_groups,
)


def test_auto_picks_by_size_and_master(monkeypatch) -> None:
    monkeypatch.delenv(MASTER_ENV, raising=False)
    assert choose_engine("auto", None, LOCAL_MAX_BYTES)[0] == "local"
    eng, why = choose_engine("auto", None, LOCAL_MAX_BYTES + 1)
    assert eng == "spark" and "more than 1 GiB" in why
    assert choose_engine("auto", "local[2]", 10)[0] == "local"
    assert choose_engine("auto", "spark://127.0.0.1:7077", 10) == ("spark", "--master spark://127.0.0.1:7077")
    monkeypatch.setenv(MASTER_ENV, "yarn")
    assert choose_engine("auto", None, 10)[0] == "spark"
    assert choose_engine("local", "yarn", 1 << 40) == ("local", "--engine local")
    assert choose_engine("spark", None, 0) == ("spark", "--engine spark")


def test_ranges_about_three_per_core_in_whole_mib() -> None:
    assert range_size_for(2 << 30, 2) == 342 << 20          # 2 GiB / 6 ranges, rounded up to a MiB
    assert range_size_for(1 << 20, 8) == 4 << 20            # never below 4 MiB
    assert range_size_for(1 << 40, 2) == 512 << 20          # nor above 512 MiB


def test_tasks_two_per_core_of_consecutive_ranges_and_equal_bytes() -> None:
    M = 1 << 20
    # 2 GiB of 256 MiB files on 2 cores: 4 tasks of 2 ranges, not 8 tasks of one (each costs Spark ~30 ms)
    assert task_groups([256 * M] * 8, 2) == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert task_groups([256 * M] * 8 + [3 * M], 2) == [[0, 1], [2, 3], [4, 5], [6, 7, 8]]
    assert task_groups([5], 8) == [[0]] and task_groups([], 2) == [] and task_groups([0, 0], 2) == [[0, 1]]
    # a big store: at most MAX_TASK_BYTES a task, so that the progress bar moves
    lengths = [256 * M] * 200
    groups = task_groups(lengths, 2)
    assert [i for g in groups for i in g] == list(range(200))
    assert max(sum(lengths[i] for i in g) for g in groups) <= MAX_TASK_BYTES
    assert len(groups) == 200 * 256 * M // MAX_TASK_BYTES
