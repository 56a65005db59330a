"""The compiled record walker gives the numpy walker's answers (issue 32): every entry point, every option,
on good buffers and on each kind of damage the recovery tests plant, and on what hypothesis makes of them.
The numpy walker is the oracle; the fallback to it when the extension is missing is tested here too."""

from __future__ import annotations

import os
import random
import shutil
import struct
import subprocess
import sys
import sysconfig
import zipfile
import zlib
from pathlib import Path

import pytest

np = pytest.importorskip("numpy")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from walker_corpus import answer, both, corpus, records, using  # noqa: E402

from mqctl.store import walker  # noqa: E402
from mqctl.store.commitlog import CommitLog, CommitLogWriter, Message, scan_buffer  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _compiled() -> object:
    try:
        from mqctl.store import _cwalker
    except ImportError:
        return None
    return _cwalker


def _can_compile() -> bool:
    cc = sysconfig.get_config_var("CC") or "cc"
    return shutil.which(cc.split()[0]) is not None and Path("/usr/include/zlib.h").exists()


cw = _compiled()
needs_c = pytest.mark.skipif(
    cw is None, reason="the compiled walker is not built (no C compiler or zlib.h at pip install)"
)


def test_the_compiled_walker_is_built_where_it_can_be() -> None:
    # pip builds it when a C compiler and zlib's header are there: then a missing one is a build bug
    if _can_compile():
        assert cw is not None, "a C compiler and zlib.h are here, but mqctl/store/_cwalker was not built"
        assert walker.select() in ("c", "numpy")
    else:
        pytest.skip("no C compiler or zlib.h here: the numpy walker is the one")


def _walks(buf: bytes, base: int) -> list[tuple[str, dict]]:
    """A grid of parse_byte_range calls over buf: ranges from the start and from inside, owned or not,
    with and without CRC, fields, extraction and stop_at_damage."""
    n = len(buf)
    cuts = sorted({0, 1, 91, n // 3, n // 2, max(n - 100, 0), n})
    out = []
    for start in cuts:
        for end in (n, min(n, start + 700)):
            for head_owned in (None, True, False):
                out.append(("range", dict(start=start, end=end, head_owned=head_owned)))
    for kw in (
        dict(check_crc=False),
        dict(fields=False),
        dict(stop_at_damage=True),
        dict(stop_at_damage=True, fields=False),
        dict(extract=("bodies", "properties", "hosts")),
        dict(extract=("hosts",), check_crc=False),
        dict(limit=n // 2),
    ):
        out.append(("range", dict(start=0, end=n, **kw)))
        out.append(("range", dict(start=n // 2, end=n, **kw)))
    return out


def _call(buf: bytes, base: int, kw: dict) -> dict:
    kw = dict(kw)
    return answer(walker.parse_byte_range(buf, base, kw.pop("start"), kw.pop("end"), **kw))


@needs_c
@pytest.mark.parametrize("case", corpus(0) + corpus(1), ids=lambda c: c[0])
def test_both_walkers_agree_on_the_damage_corpus(case) -> None:
    _, base, buf = case
    for what, kw in _walks(buf, base):
        c, ref = both(lambda kw=kw: _call(buf, base, kw))
        assert c == ref, (what, kw)
    # blocks, the chains of an earlier walk, records read back at their positions, the recovery scan
    c, ref = both(
        lambda: [
            answer(p)
            for p in walker.parse_blocks(buf, base, 0, len(buf), block=3, extract=("bodies", "hosts"))
        ]
    )
    assert c == ref
    with using("numpy"):
        scan = scan_buffer(buf, base, keep_chain=True)
        good = walker.parse_byte_range(buf, base, 0, len(buf))
    c, ref = both(
        lambda: [answer(p) for p in walker.parse_blocks(buf, base, 0, len(buf), block=5, known=scan.chain)]
    )
    assert c == ref
    c, ref = both(
        lambda: answer(walker.records_at(buf, base, good.position, extract=("bodies", "properties", "hosts")))
    )
    assert c == ref
    c, ref = both(lambda: answer(walker.records_at(buf, base, good.position[::-1].copy(), topics=False)))
    assert c == ref

    def scan() -> dict:
        s = scan_buffer(buf, base, keep_chain=True)
        return vars(s) | {"chain": s.chain.positions.tolist() if s.chain else None, "error": str(s.error)}

    c, ref = both(scan)
    assert c == ref


@needs_c
def test_topic_codes_in_the_numpy_walkers_order_over_several_blocks_of_rows() -> None:
    # _topics compares topics as rows in blocks of 8 MiB / (width + 2) records: with 254-byte topics a
    # block is 32,768 records, and a topic first met in the second block gets its code after the first's
    rng = np.random.default_rng(7)
    names = [bytes([65 + i]) * rng.integers(1, 255) for i in range(12)]
    names[3] = b"Z" * 254
    first_half = rng.integers(0, 6, size=40_000)
    codes = np.concatenate([first_half, rng.integers(0, 12, size=40_000)])
    codes[-1] = 3
    buf = b"".join(names)
    starts = np.cumsum([0] + [len(n) for n in names])[:-1]
    at, tlen = starts[codes], np.asarray([len(n) for n in names])[codes]
    u8 = np.frombuffer(buf, dtype=np.uint8)
    want_codes, want_names = walker._topics(u8, memoryview(buf), at, tlen)
    got_codes, got_names = walker._topic_order(codes, names, tlen)
    assert got_names == want_names and got_codes.tolist() == want_codes.tolist()
    # the blocks matter here: sorted all at once the names would come in another order
    assert len(want_names) == 12 and want_names != sorted(want_names, key=lambda t: (len(t), t))


@needs_c
def test_zero_gaps_of_many_windows_are_passed_over_the_same() -> None:
    # resync looks for a record window by window (_CHUNK bytes); the compiled walker skips the zero
    # windows with nonzero() and must land in the same window, also when the record after the gap starts
    # in the last 8 bytes of one (the numpy walker's window test reads 8 bytes past its end)
    rng = random.Random(11)
    head, _ = records(0, rng, 3)
    C = walker._CHUNK  # the windows start at the gap's second byte (region: resync(pos + 1))
    for gap in (1, 7, C - 9, C - 4, C - 3, C - 2, C - 1, C, C + 1, C + 3, 2 * C - 2, 2 * C + 6, 3 * C + 100):
        at = len(head) + gap
        tail, _ = records(at, rng, 2)
        buf = bytes(head) + bytes(gap) + bytes(tail) + bytes(rng.choice((0, 5, walker._CHUNK + 1)))

        def run(buf: bytes = buf) -> object:
            return answer(walker.parse_byte_range(buf, 0, 0, len(buf)))

        c, ref = both(run)
        assert c == ref, gap
        assert ref["position"][1][-2] == at, gap  # the records after the gap were found


@needs_c
def test_records_at_a_position_that_is_not_a_record_raises_the_same() -> None:
    buf, at = records(4096, random.Random(5), 6)
    buf = bytes(buf)
    for bad in ([at[1] + 1], [len(buf) - 10], [-3], [at[2], at[2] + 7]):
        c, ref = both(lambda bad=bad: answer(walker.records_at(buf, 4096, np.asarray(bad, dtype=np.int64))))
        assert c == ref and c[0] == "raised", bad
    # a stale position whose TOTALSIZE now runs past the file's end (found by the fuzz harness: the numpy
    # walker read past the buffer and raised IndexError)
    grown = bytearray(buf)
    sysflag = struct.unpack_from(">i", grown, at[4] + 36)[0]
    brel = 68 + (20 if sysflag & 0x10 else 8) + (20 if sysflag & 0x20 else 8)
    struct.pack_into(">i", grown, at[4], 1 << 20)
    struct.pack_into(">i", grown, at[4] + brel, (1 << 20) - 200)  # the body too, past the end
    c, ref = both(lambda: answer(walker.records_at(bytes(grown), 4096, np.asarray(at[3:5], dtype=np.int64))))
    assert (
        c
        == ref
        == (
            "raised",
            "RecordError",
            f"offset {4096 + at[4]}: torn record: TOTALSIZE "
            f"{1 << 20} but only {len(buf) - at[4]} bytes remain",
        )
    )


@needs_c
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(0, 2**40),
    st.integers(1, 12),
    st.randoms(use_true_random=False),
    st.lists(
        st.tuples(
            st.integers(0, 10**6),
            st.sampled_from(["flip", "set", "cut", "zero", "dup"]),
            st.binary(min_size=1, max_size=12),
        ),
        max_size=4,
    ),
    st.integers(0, 10**6),
    st.booleans(),
    st.booleans(),
)
def test_both_walkers_agree_on_random_damage(base, count, rng, edits, cut, stop, crc) -> None:
    buf, _ = records(base, rng, count)
    for at, how, data in edits:
        if not buf:
            break
        i = at % len(buf)
        if how == "flip":
            buf[i] ^= data[0] or 1
        elif how == "set":
            buf[i : i + len(data)] = data
        elif how == "cut":
            del buf[i:]
        elif how == "zero":
            buf[i : i + data[0]] = bytes(len(buf[i : i + data[0]]))
        else:
            buf += buf[i : i + 300]
    data = bytes(buf)
    start = cut % (len(data) + 1)
    for kw in (
        dict(start=0, end=len(data)),
        dict(start=start, end=len(data)),
        dict(start=start, end=len(data), head_owned=True, stop_at_damage=stop, check_crc=crc),
        dict(start=0, end=len(data), extract=("bodies", "properties", "hosts")),
    ):
        c, ref = both(lambda kw=kw: _call(data, base, kw))
        assert c == ref, kw


@needs_c
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=5000), st.integers(0, 64))
def test_crc32_is_zlibs(data: bytes, skip: int) -> None:
    assert cw.crc32(data) == zlib.crc32(data)
    assert cw.crc32(memoryview(data)[skip:]) == zlib.crc32(data[skip:])


@needs_c
def test_a_store_reads_the_same_with_either_walker(tmp_path: Path) -> None:
    d = tmp_path / "commitlog"
    rng = random.Random(3)
    with CommitLogWriter(d, 4096) as w:
        for i in range(60):
            w.append(
                Message(
                    rng.choice(["A", "B" * 130]),
                    rng.randbytes(rng.randrange(300)),
                    queue_offset=i,
                    born_host=rng.choice([("127.0.0.1", 1), ("::1", 2)]),
                )
            )
    p = sorted(d.iterdir())[2]
    b = bytearray(p.read_bytes())
    b[700] ^= 0x40
    p.write_bytes(bytes(b))

    def read() -> tuple:
        log = CommitLog(d)
        s = log.scan(deep=True, keep_chains=True)
        recs = [r.to_dict(with_body=True) for r in log.iter_records(strict=False)]
        chains = sorted((k, v.positions.tolist(), v.end) for k, v in s.chains.items())
        return vars(s) | {"chains": chains}, recs

    c, ref = both(read)
    assert c == ref and c[0]["records"] > 10


def test_walker_choice_by_environment_and_the_version_line() -> None:
    env = dict(os.environ)
    for want, expect in (
        ("numpy", "record walker: numpy"),
        ("c", "record walker: c (CRC-32: "),
        ("bogus", "record walker: numpy (CRC-32: "),
    ):
        if want == "c" and cw is None:
            continue
        env["MQCTL_WALKER"] = want
        out = subprocess.run(
            [sys.executable, "-m", "mqctl", "--version"], env=env, capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0 and out.stdout.splitlines()[1].startswith(expect), out
    env.pop("MQCTL_WALKER")
    out = subprocess.run(
        [sys.executable, "-m", "mqctl", "recover", "inspect", "-v", "/nonexistent-store"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "record walker: " + ("c" if cw is not None else "numpy") in out.stderr, out


HIDE = """
import sys
class Hide:
    def find_spec(self, name, path=None, target=None):
        if name == "mqctl.store._cwalker":
            raise ImportError("hidden by the test")
sys.meta_path.insert(0, Hide())
"""


def test_without_the_extension_the_numpy_walker_reads(tmp_path: Path) -> None:
    # the fallback path: the extension cannot be imported (as when pip could not build it)
    d = tmp_path / "commitlog"
    with CommitLogWriter(d, 4096) as w:
        for i in range(30):
            w.append(Message("T", bytes([i]) * 200, queue_offset=i))
    code = (
        HIDE
        + f"""
from mqctl.store import walker
from mqctl.store.commitlog import CommitLog
assert walker.IMPL == "numpy" and walker._cw is None, walker.IMPL
assert "not built" in walker.describe(), walker.describe()
s = CommitLog({str(d)!r}).scan(deep=True)
print(walker.IMPL, s.records, s.max_offset)
try:
    walker.select("c")
except ImportError as exc:
    print("forced:", exc)
"""
    )
    env = dict(os.environ, MQCTL_WALKER="")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"numpy 30 {_max_offset(d)}"
    assert lines[1].startswith("forced: the compiled record walker is not installed")
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            HIDE + "import sys; from mqctl.cli import main; sys.argv = ['mqctl', '--version']; main()",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "record walker: numpy (CRC-32: " in out.stdout and "not built" in out.stdout, out


def _max_offset(d: Path) -> int:
    with using("numpy"):
        return CommitLog(d).scan(deep=True).max_offset


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None, reason="no C compiler")
def test_pip_install_succeeds_without_a_compiler(tmp_path: Path) -> None:
    # the extension is optional: a wheel is built, without it, when compiling fails. From a copy of the
    # sources: a build/ directory left by an earlier build would hand setuptools its compiled extension
    src = tmp_path / "src"
    shutil.copytree(
        ROOT,
        src,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "build", "dist", "*.so", "*.egg-info", "__pycache__", ".hypothesis", ".*_cache"
        ),
    )
    env = dict(os.environ, CC=str(tmp_path / "no-such-cc"), LDSHARED=str(tmp_path / "no-such-cc"))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "-w",
            str(tmp_path / "w"),
            str(src),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    (whl,) = (tmp_path / "w").glob("mqctl-*.whl")
    names = zipfile.ZipFile(whl).namelist()
    assert "mqctl/store/walker.py" in names
    assert not [n for n in names if "_cwalker" in n and n.endswith(".so")], names


def test_the_two_magics_and_blank_marker_are_the_c_walkers() -> None:
    # the constants the C source has must be the store module's
    src = (ROOT / "mqctl/store/_cwalker.c").read_text()
    from mqctl.store.commitlog import MAGIC_V1, MAGIC_V2, MAX_RECORD_SIZE, MIN_RECORD_SIZE

    assert f"#define MAGIC_V1 0x{MAGIC_V1:08X}u" in src and f"#define MAGIC_V2 0x{MAGIC_V2:08X}u" in src
    assert f"#define MIN_RECORD_SIZE {MIN_RECORD_SIZE}" in src and MAX_RECORD_SIZE == 1 << 30
    assert "#define MAX_RECORD_SIZE (1 << 30)" in src
    assert struct.calcsize("q") == 8
