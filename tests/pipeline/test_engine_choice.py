"""--engine auto's documented rule and the range sizing (pure functions: no Spark, no files)."""

from __future__ import annotations

from mqctl.pipeline.engine import (
    MASTER_ENV,
    MAX_TASK_BYTES,
    choose_engine,
    local_cores,
    range_size_for,
    spark_conf,
    task_groups,
)


def test_auto_picks_spark_when_it_is_estimated_sooner(monkeypatch) -> None:
    monkeypatch.delenv(MASTER_ENV, raising=False)
    G = 1 << 30
    # the numpy walker, 2 cores: Spark pays its start-up back from 3 GiB of salvage and 16 GiB of analyze
    assert choose_engine("auto", "local[2]", int(2.9 * G), walker="numpy")[0] == "local"
    assert choose_engine("auto", "local[2]", int(3.2 * G), walker="numpy")[0] == "spark"
    eng, why = choose_engine("auto", "local[2]", int(3.5 * G), walker="numpy")
    assert eng == "spark"
    assert why == (
        "3.50 GiB to read: about 24 s in this process, 23 s on Spark with 2 cores and its "
        "start-up; --engine local to stay in this process"
    )
    assert choose_engine("auto", "local[2]", 15 * G, "analyze commitlog", walker="numpy")[0] == "local"
    assert choose_engine("auto", "local[2]", 17 * G, "analyze commitlog", walker="numpy")[0] == "spark"
    # the compiled walker reads faster in one process: Spark pays back later (4.3 and 41 GiB on 2 cores)
    assert choose_engine("auto", "local[2]", int(4.1 * G), walker="c")[0] == "local"
    assert choose_engine("auto", "local[2]", int(4.5 * G), walker="c")[0] == "spark"
    assert choose_engine("auto", "local[2]", 40 * G, "analyze commitlog", walker="c")[0] == "local"
    assert choose_engine("auto", "local[2]", 42 * G, "analyze commitlog", walker="c")[0] == "spark"
    assert choose_engine("auto", "local[8]", int(1.8 * G), walker="c")[0] == "spark"
    assert choose_engine("auto", "local[8]", int(1.6 * G), walker="c")[0] == "local"
    # more cores, sooner; one core, never
    assert choose_engine("auto", "local[8]", int(1.3 * G), walker="numpy")[0] == "spark"
    assert choose_engine("auto", "local[8]", int(1.1 * G), walker="numpy")[0] == "local"
    assert choose_engine("auto", "local", 1 << 40)[0] == "local"
    eng, why = choose_engine("auto", "local[2]", 10)
    assert eng == "local" and why.endswith("--engine spark to use Spark")
    assert choose_engine("auto", "spark://127.0.0.1:7077", 10) == ("spark", "--master spark://127.0.0.1:7077")
    monkeypatch.setenv(MASTER_ENV, "yarn")
    assert choose_engine("auto", None, 10)[0] == "spark"
    assert choose_engine("local", "yarn", 1 << 40) == ("local", "--engine local")
    assert choose_engine("spark", None, 0) == ("spark", "--engine spark")


def test_auto_uses_the_rates_of_the_walker_in_use(monkeypatch) -> None:
    from mqctl.store import walker

    monkeypatch.delenv(MASTER_ENV, raising=False)
    size = int(3.7 * (1 << 30))  # Spark on 2 cores with the numpy walker, not with the compiled one
    monkeypatch.setattr(walker, "IMPL", "numpy")
    assert choose_engine("auto", "local[2]", size)[0] == "spark"
    monkeypatch.setattr(walker, "IMPL", "c")
    assert choose_engine("auto", "local[2]", size)[0] == "local"


def test_local_cores_of_a_master_url(monkeypatch) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 6)
    urls = ("local", "local[3]", "local[4,2]", "local[*]", "local[*,3]")
    assert [local_cores(m) for m in urls] == [1, 3, 4, 6, 6]
    # the session's parallelism (what ranges and tasks are sized by) is the master's cores, not the host's
    assert spark_conf("local[4]")["spark.default.parallelism"] == "4"
    assert spark_conf("local[*]")["spark.default.parallelism"] == "6"


def test_ranges_about_three_per_core_in_whole_mib() -> None:
    assert range_size_for(2 << 30, 2) == 342 << 20  # 2 GiB / 6 ranges, rounded up to a MiB
    assert range_size_for(1 << 20, 8) == 4 << 20  # never below 4 MiB
    assert range_size_for(1 << 40, 2) == 512 << 20  # nor above 512 MiB


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
