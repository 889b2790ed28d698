from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from neardup import InvalidConfig
from neardup.kernels.threads import get_threads, limited_threads, max_threads, set_threads


def test_default_is_the_limit_and_the_block_restores_it() -> None:
    assert get_threads() == max_threads() >= 1
    with limited_threads(1):
        assert get_threads() == 1
    assert get_threads() == max_threads()


def test_the_count_is_per_thread() -> None:
    seen: list[int] = []

    def other() -> None:
        seen.append(get_threads())

    with limited_threads(1):
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert seen == [max_threads()]


@pytest.mark.parametrize("bad", [0, -1, 10_000])
def test_out_of_range_is_refused_with_the_range(bad: int) -> None:
    with pytest.raises(InvalidConfig, match=r"must be in \[1, \d+\]"):
        set_threads(bad)


def test_numba_gets_the_count_once_loaded_and_is_never_loaded_to_ask() -> None:
    code = (
        "import sys\n"
        "from neardup.kernels.threads import get_threads, limited_threads\n"
        "with limited_threads(1):\n"
        "    assert get_threads() == 1\n"
        "assert 'numba' not in sys.modules\n"
        "import numba\n"
        "with limited_threads(1):\n"
        "    assert numba.get_num_threads() == 1\n"
        "print('ok')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "ok"


@pytest.mark.parametrize("n", [0, 1, 4095, 4096, 100_003])
@pytest.mark.parametrize("threads", [1, 2])
def test_split_rows_covers_every_row_once(n: int, threads: int) -> None:
    from neardup.kernels.threads import split_rows

    hits = [0] * n
    lock = threading.Lock()

    def run(lo: int, hi: int) -> None:
        with lock:
            for i in range(lo, hi):
                hits[i] += 1

    with limited_threads(min(threads, max_threads())):
        split_rows(n, run, grain=2048)
    assert hits == [1] * n


def test_split_rows_propagates_a_part_failure() -> None:
    from neardup.kernels.threads import split_rows

    def run(lo: int, hi: int) -> None:
        if lo > 0:
            raise ValueError(f"part at {lo}")

    with limited_threads(min(2, max_threads())), pytest.raises(ValueError, match="part at"):
        split_rows(100_000, run, grain=1000)


@pytest.mark.parametrize("threads", [1, 2, 8])
def test_run_calls_makes_each_call_once_on_at_most_the_threads_asked(threads: int) -> None:
    from neardup.kernels.threads import run_calls

    seen: list[tuple[int, str]] = []
    lock = threading.Lock()

    def call(i: int) -> None:
        with lock:
            seen.append((i, threading.current_thread().name))

    run_calls([lambda i=i: call(i) for i in range(50)], threads, name="probe")
    assert sorted(i for i, _ in seen) == list(range(50))
    names = {name for _, name in seen}
    assert len(names) <= threads
    assert threading.current_thread().name in names or threads > 1
    assert not [t for t in threading.enumerate() if t.name.startswith("probe_")]


@pytest.mark.parametrize("threads", [1, 2])
def test_run_calls_stops_at_a_failure_and_raises_the_first_in_order(threads: int) -> None:
    from neardup.kernels.threads import run_calls

    ran: list[int] = []
    release = threading.Event()

    def call(i: int) -> None:
        ran.append(i)
        if i == 3:
            # The other thread may be running call 4 meanwhile; it takes no more.
            release.wait(0.2)
            raise KeyError(i)
        if i == 4:
            release.set()
            raise KeyError(i)

    with pytest.raises(KeyError) as info:
        run_calls([lambda i=i: call(i) for i in range(50)], threads, name="probe")
    assert info.value.args == (3,)
    # Call 4 runs only if a second thread was free to take it while 3 ran.
    assert sorted(ran) in ([0, 1, 2, 3], [0, 1, 2, 3, 4][: 4 if threads == 1 else 5])
